/// Context switches of every thread of a process, from
/// `/proc/PID/task/TID/status` (`voluntary_ctxt_switches`: the thread slept
/// and was woken; `nonvoluntary_ctxt_switches`: it was preempted) and its
/// name from `/proc/PID/task/TID/comm`.
public struct ThreadSwitches: Sendable {
    public struct Thread: Sendable {
        public var tid: Int
        public var name: String
        public var voluntary: Int
        public var nonvoluntary: Int
    }

    public var threads: [Int: Thread]

    public init(pid: Int32) {
        var threads: [Int: Thread] = [:]
        for entry in listDirectory("/proc/\(pid)/task") {
            guard let tid = Int(entry) else { continue }
            let base = "/proc/\(pid)/task/\(tid)"
            let name = (readFile(base + "/comm") ?? "?").split(separator: "\n").first.map(String.init) ?? "?"
            let status = readFile(base + "/status") ?? ""
            threads[tid] = Thread(tid: tid, name: name, voluntary: Self.field("voluntary_ctxt_switches", in: status),
                                  nonvoluntary: Self.field("nonvoluntary_ctxt_switches", in: status))
        }
        self.threads = threads
    }

    private static func field(_ name: String, in status: String) -> Int {
        for line in status.split(separator: "\n") where line.hasPrefix(name + ":") {
            return Int(line.dropFirst(name.count + 1).filter { $0 != " " && $0 != "\t" }) ?? 0
        }
        return 0
    }

    /// Switches per thread between `earlier` and `self`, threads that exist in
    /// both (a thread born in between counts from zero), by thread id.
    public func since(_ earlier: ThreadSwitches) -> [Thread] {
        threads.values.map { now in
            let before = earlier.threads[now.tid]
            return Thread(tid: now.tid, name: now.name, voluntary: now.voluntary - (before?.voluntary ?? 0),
                          nonvoluntary: now.nonvoluntary - (before?.nonvoluntary ?? 0))
        }.sorted { $0.tid < $1.tid }
    }
}
