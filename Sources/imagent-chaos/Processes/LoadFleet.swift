import Foundation
import IMAgentTestKit
import NIOConcurrencyHelpers

/// The clients: `slots` `imagent-loadgen` processes streaming at once, each
/// with its own sessions to `echo` (a known stream each way, every echo
/// checked exactly once, in order, intact). When one finishes, the next takes
/// its slot while the fleet is feeding, so the load never stops during the
/// faults; the reports of all of them are summed at the end.
///
/// Each loadgen keeps its session ids in a `--state` file, so after a
/// `kill -9` a new process with the same tag attaches the same sessions and
/// goes on from the daemon's SENT_SEQ / DELIVERED_SEQ; `--reattach-every`
/// makes every loadgen close its connection and attach again on its own.
final class LoadFleet: @unchecked Sendable {
    struct Shape: Sendable {
        var slots: Int
        var sessions: Int
        var messagesPerSession: Int
        var window: Int
        var reattachSeconds: Double
        var deadlineSeconds: Int
        /// Stop starting loadgens once this many messages (each way) were started.
        var messageTarget: Int

        var messagesPerLoadgen: Int { sessions * messagesPerSession }
    }

    /// One finished loadgen: its JSON report, status and the files it wrote.
    struct Finished: Sendable {
        var tag: Int
        nonisolated(unsafe) var fields: [String: Any]
        var json: String
        var status: Int32
        /// Ended by a signal (`status` is its number), not by exit.
        var signaled: Bool
        var errPath: String
        var latencyPath: String
        /// Times this tag was killed with -9 and started again.
        var restarts: Int

        func int(_ key: String) -> Int { (fields[key] as? NSNumber)?.intValue ?? 0 }
        var passed: Bool { status == 0 && fields["passed"] as? Bool == true }
    }

    private struct Running {
        var tag: Int
        var process: ChildProcess
        var startedAt: Date
        var restarts = 0
    }

    let shape: Shape
    private let directory: String
    private let socketPath: String
    private let lock = NSLock()
    private var running: [Int: Running] = [:]   // by slot
    private var finished: [Finished] = []
    private var nextTag = 1
    private var started = 0
    private var feeding = true
    private var supervisor: Task<Void, Never>?

    init(shape: Shape, directory: String, socketPath: String) {
        self.shape = shape
        self.directory = directory + "/loadgens"
        self.socketPath = socketPath
        try? FileManager.default.createDirectory(atPath: self.directory, withIntermediateDirectories: true)
    }

    var messagesStarted: Int { lock.withLock { started * shape.messagesPerLoadgen } }
    var reports: [Finished] { lock.withLock { finished } }
    var isIdle: Bool { lock.withLock { running.isEmpty } }

    /// Fills every slot and keeps them filled until `stopFeeding()`.
    func start() throws {
        for slot in 0..<shape.slots { try launch(slot: slot) }
        supervisor = Task { [self] in
            while !Task.isCancelled {
                reap()
                if isIdle, !lock.withLock({ feeding }) { return }
                try? await Task.sleep(for: .milliseconds(100))
            }
        }
    }

    func stopFeeding() { lock.withLock { feeding = false } }

    /// Waits until every running loadgen has finished, at most `seconds`; false if some still run.
    func drain(seconds: Double) async -> Bool {
        stopFeeding()
        let deadline = Date().addingTimeInterval(seconds)
        while !isIdle, Date() < deadline { try? await Task.sleep(for: .milliseconds(100)) }
        reap()
        return isIdle
    }

    /// Clients detaching abruptly: `kill -9` the loadgen started last that has saved its sessions
    /// (the furthest from its end, so it has not begun closing them), then a new process with the
    /// same tag and state file.
    func killAndRestartNewest() async -> String? {
        // Out of `running` first, so the supervisor does not take the killed process for a finished one.
        let picked: (Int, Running)? = lock.withLock {
            // Only one that has saved its sessions: killed before that, it would have nothing to resume.
            guard let (slot, entry) = running.filter({
                $0.value.process.isRunning && FileManager.default.fileExists(atPath: statePath($0.value.tag))
            }).max(by: { $0.value.startedAt < $1.value.startedAt }) else { return nil }
            running[slot] = nil
            return (slot, entry)
        }
        guard let (slot, entry) = picked else { return nil }
        await Children.shared.kill9(entry.process)
        guard FileManager.default.fileExists(atPath: statePath(entry.tag)) else {
            // It finished on its own just before (the state file goes once its sessions are closed).
            let report = read(entry)
            lock.withLock { finished.append(report) }
            if report.json == "(no report)" { Log.line("loadgen \(entry.tag) was killed after its sessions closed, before its report") }
            try? launch(slot: slot)
            return nil
        }
        do {
            let process = try spawn(tag: entry.tag)
            lock.withLock { running[slot] = Running(tag: entry.tag, process: process, startedAt: entry.startedAt,
                                                    restarts: entry.restarts + 1) }
            return "loadgen \(entry.tag) (pid \(entry.process.processIdentifier)) kill -9, restarted as pid \(process.processIdentifier)"
        } catch {
            Log.line("cannot restart loadgen \(entry.tag): \(error)")
            return nil
        }
    }

    // MARK: Internals

    private func reap() {
        guard !Children.shared.isCleaningUp else { return }
        let done: [(Int, Running)] = lock.withLock { running.filter { !$0.value.process.isRunning }.map { ($0.key, $0.value) } }
        for (slot, entry) in done {
            let report = read(entry)
            lock.withLock {
                finished.append(report)
                running[slot] = nil
            }
            if !report.passed { Log.line("loadgen \(entry.tag) FAILED: \(report.json)") }
            let again = lock.withLock { feeding && started * shape.messagesPerLoadgen < shape.messageTarget }
            if again {
                do { try launch(slot: slot) } catch { Log.line("cannot start a loadgen: \(error)") }
            }
        }
    }

    private func launch(slot: Int) throws {
        let tag = lock.withLock { () -> Int in
            defer { nextTag += 1 }
            return nextTag
        }
        let process = try spawn(tag: tag)
        lock.withLock {
            started += 1
            running[slot] = Running(tag: tag, process: process, startedAt: Date())
        }
    }

    private func spawn(tag: Int) throws -> ChildProcess {
        var arguments = [
            "--sessions", "\(shape.sessions)",
            "--messages", "\(shape.messagesPerSession)", "--window", "\(shape.window)",
            "--deadline", "\(shape.deadlineSeconds)", "--state", statePath(tag),
            "--latency-file", latencyPath(tag),
        ]
        if shape.reattachSeconds > 0 { arguments += ["--reattach-every", "\(shape.reattachSeconds)"] }
        return try LoadgenHandle.start(socketPath: socketPath, tag: tag, arguments: arguments, outPath: outPath(tag),
                                       errPath: errPath(tag), spawner: Children.shared.spawner).process
    }

    private func read(_ entry: Running) -> Finished {
        let out = (try? String(contentsOfFile: outPath(entry.tag), encoding: .utf8)) ?? ""
        let line = out.split(separator: "\n").last.map(String.init) ?? ""
        let fields = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any] ?? [:]
        return Finished(tag: entry.tag, fields: fields, json: line.isEmpty ? "(no report)" : line,
                        status: entry.process.terminationStatus,
                        signaled: entry.process.terminationReason == .uncaughtSignal, errPath: errPath(entry.tag),
                        latencyPath: latencyPath(entry.tag), restarts: entry.restarts)
    }

    private func statePath(_ tag: Int) -> String { directory + "/\(tag).state" }
    private func outPath(_ tag: Int) -> String { directory + "/\(tag).out" }
    private func errPath(_ tag: Int) -> String { directory + "/\(tag).err" }
    private func latencyPath(_ tag: Int) -> String { directory + "/\(tag).latency" }
}
