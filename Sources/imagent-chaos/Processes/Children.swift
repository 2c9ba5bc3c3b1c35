import Foundation
import IMAgentTestKit

/// Every process this run started and every clean-up step it registered,
/// so that one path — normal end, failure, SIGINT/SIGTERM/SIGHUP or the time
/// limit — kills what is left and removes what was created.
final class Children: @unchecked Sendable {
    static let shared = Children()

    private let lock = NSLock()
    private var running: [pid_t: String] = [:]
    /// Run in reverse order of registration (the topology after the processes in it).
    private var cleanups: [(name: String, action: () -> Void)] = []
    private var cleanedUp = false
    private var signalSources: [DispatchSourceSignal] = []

    /// Starts `executable` with `arguments`, stdout and stderr appended to `log` (stdout to `stdout` if given).
    func spawn(_ name: String, _ executable: String, _ arguments: [String], log: String, stdout: String? = nil) throws -> ChildProcess {
        try spawner.spawn(name, executable, arguments, stdout ?? log, log, [:])
    }

    /// What the kit's program handles start their children with: recorded here, so the clean-up kills them.
    var spawner: ProgramSpawner {
        ProgramSpawner { [self] name, executable, arguments, stdout, stderr, setting in
            try lock.withLock {
                guard !cleanedUp else { throw ChaosError("cleaning up; not starting \(name)") }
                let process = try ProgramSpawner.direct.spawn(name, executable, arguments, stdout, stderr, setting)
                running[process.processIdentifier] = name
                return process
            }
        }
    }

    /// SIGKILL, then waits (bounded) for the process to be gone.
    func kill9(_ process: ChildProcess) async {
        process.signal(SIGKILL)
        await waitForExit(process, seconds: 10)
    }

    /// SIGTERM, then SIGKILL if it is still there after `seconds`.
    func terminate(_ process: ChildProcess, seconds: Double = 5) async {
        await process.stop(grace: .milliseconds(Int64(seconds * 1000)))
        await waitForExit(process, seconds: 0)
    }

    /// Waits at most `seconds` for the process to exit; once it has, it is no longer one to kill at the end.
    func waitForExit(_ process: ChildProcess, seconds: Double) async {
        _ = await process.exit(within: .milliseconds(Int64(seconds * 1000)))
        if !process.isRunning { _ = lock.withLock { running.removeValue(forKey: process.processIdentifier) } }
    }

    func onCleanup(_ name: String, _ action: @escaping () -> Void) {
        lock.withLock { cleanups.append((name, action)) }
    }

    /// True once `cleanUp()` began: what dies then was killed by it.
    var isCleaningUp: Bool { lock.withLock { cleanedUp } }

    /// Kills every child still running, then runs the clean-up steps, newest first. Runs once.
    func cleanUp() {
        let (pids, steps): ([pid_t: String], [(name: String, action: () -> Void)]) = lock.withLock {
            guard !cleanedUp else { return ([:], []) }
            cleanedUp = true
            return (running, cleanups)
        }
        for (pid, _) in pids { kill(pid, SIGKILL) }
        for (pid, _) in pids {
            // Reap or at least wait until the kernel has it gone (a zombie of ours counts as gone).
            for _ in 0..<200 where Foundation.kill(pid, 0) == 0 && !isZombie(pid) { usleep(10_000) }
        }
        for step in steps.reversed() { step.action() }
    }

    /// SIGINT, SIGTERM and SIGHUP clean up and exit 130/143/129; `seconds` later the
    /// whole run is cut short the same way (exit 124).
    func installTraps(timeLimitSeconds: Double) {
        for signalNumber in [SIGINT, SIGTERM, SIGHUP] {
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            source.setEventHandler { [self] in
                Log.line("signal \(signalNumber): cleaning up")
                cleanUp()
                exit(128 + signalNumber)
            }
            source.resume()
            signalSources.append(source)
        }
        let watchdog = Thread { [self] in
            Thread.sleep(forTimeInterval: timeLimitSeconds)
            Log.line("time limit of \(Int(timeLimitSeconds)) s reached: killing everything and cleaning up")
            cleanUp()
            exit(124)
        }
        watchdog.start()
    }

    private func isZombie(_ pid: pid_t) -> Bool {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return true }
        return text[text.index(close, offsetBy: 2)...].hasPrefix("Z")
    }

}
