#if canImport(Glibc)
import Glibc
#endif
import IMAgentTestKit

/// Two mosquitto brokers on loopback, each a child process with its own
/// configuration and persistence directory: `upstream` stands where the
/// reference server stands, `local` where imagentd stands, bridged to
/// upstream at QoS 1 (`bench/#` out, `resp/#` in).
///
/// Both tunings set `max_queued_messages 0` (no limit): with the default of
/// 1,000 the local broker PUBACKs messages it later drops silently when the
/// bridge falls behind, and a comparison that loses messages compares
/// nothing. `persistence true` is set too, but mosquitto writes its snapshot
/// only every `autosave_interval` (1,800 s): it is not per-message durability.
/// `tuned` adds `set_tcp_nodelay true` and unlimited in-flight messages, the
/// best mosquitto offers without patches.
final class MosquittoBridge {
    enum Tuning: String, CaseIterable {
        case shipped = "as shipped"
        case tuned = "tuned"

        /// As `--tunings` names it: `shipped` or `tuned`.
        init?(option: String) {
            switch option {
            case "shipped", "as-shipped": self = .shipped
            case "tuned": self = .tuned
            default: return nil
            }
        }
    }

    static let binary = "/usr/sbin/mosquitto"

    let directory: String
    let upstreamPort: Int
    let localPort: Int
    /// The upstream and the local broker.
    private var brokers: [ChildProcess] = []
    var pids: [pid_t] { brokers.map(\.processIdentifier) }

    init(tuning: Tuning) async throws {
        guard access(Self.binary, X_OK) == 0 else {
            throw BenchError("\(Self.binary) is missing: apt-get install mosquitto (scripts/bench does)")
        }
        directory = try makeTemporaryDirectory(prefix: "imagent-bench-mosquitto")
        temporaryDirectories.append(directory)
        upstreamPort = try freeLoopbackPort()
        localPort = try freeLoopbackPort()
        do {
            let common = """
                allow_anonymous true
                user root
                persistence true
                max_queued_messages 0
                log_dest stderr
                log_type error
                log_type warning
                \(tuning == .tuned ? "set_tcp_nodelay true\nmax_inflight_messages 0\n" : "")
                """
            mkdir(directory + "/upstream", 0o700)
            mkdir(directory + "/local", 0o700)
            try writeFile(directory + "/upstream.conf", """
                listener \(upstreamPort) 127.0.0.1
                persistence_location \(directory)/upstream/
                \(common)
                """)
            try writeFile(directory + "/local.conf", """
                listener \(localPort) 127.0.0.1
                persistence_location \(directory)/local/
                \(common)
                connection upstream
                address 127.0.0.1:\(upstreamPort)
                topic bench/# out 1
                topic resp/# in 1

                """)
            brokers.append(try broker("upstream"))
            try await waitForListener(upstreamPort)
            brokers.append(try broker("local"))
            try await waitForListener(localPort)
            for pid in pids { mosquittoPIDs.append(pid) }
        } catch {
            await stop()
            throw error
        }
    }

    /// VmRSS of the two brokers in KiB.
    var memory: (upstream: Int, local: Int) {
        (DaemonProcess.memory(of: pids[0]).rss, DaemonProcess.memory(of: pids[1]).rss)
    }

    var log: String {
        (readFile(directory + "/local.log") ?? "") + (readFile(directory + "/upstream.log") ?? "")
    }

    func stop() async {
        for broker in brokers { await broker.stop() }
        mosquittoPIDs.removeAll { pids.contains($0) }
        brokers = []
        removeDirectory(directory)
    }

    /// `mosquitto -c NAME.conf`, its output to NAME.log.
    private func broker(_ name: String) throws -> ChildProcess {
        try ChildProcess(executable: Self.binary, arguments: ["-c", directory + "/\(name).conf"],
                         stdout: .file(directory + "/\(name).log"), stderr: .file(directory + "/\(name).log"))
    }
}

/// Brokers to kill if the watchdog has to end the run.
nonisolated(unsafe) var mosquittoPIDs: [pid_t] = []

/// Waits until something accepts TCP connections on 127.0.0.1:`port` (5 s at most).
private func waitForListener(_ port: Int) async throws {
    for _ in 0..<200 {
        if loopbackAccepts(port) { return }
        try await Task.sleep(for: .milliseconds(25))
    }
    throw BenchError("mosquitto did not listen on port \(port) within 5 s")
}
