#if canImport(Glibc)
import Glibc
#endif

/// An `imagentd` child started on a configuration file the caller wrote; ready
/// once its IPC socket accepts a connection.
public final class DaemonHandle: ProgramHandle {
    public let process: ChildProcess
    public let socketPath: String
    public let logPath: String
    /// When the process was spawned.
    public let startedAt: ContinuousClock.Instant

    /// Starts the daemon and (with `waitUntilReady`) returns once its socket accepts.
    ///
    /// - Parameters:
    ///   - namespace: a network namespace to run it in (`ip netns exec`).
    ///   - setting: environment variables for it (`NOTIFY_SOCKET`, `WATCHDOG_USEC`…).
    public static func start(configPath: String, socketPath: String, logPath: String, binary: String = BuiltPrograms.daemon,
                             namespace: String? = nil, setting: [String: String] = [:], waitUntilReady: Bool = true,
                             within limit: Duration = .seconds(30), spawner: ProgramSpawner = .direct) async throws -> DaemonHandle {
        // A daemon killed with -9 leaves its socket file: waiting for the file, or a connection
        // the old listener's backlog took, must mean the new daemon's.
        unlink(socketPath)
        let (executable, arguments) = ProgramSpawner.command(binary, ["--config", configPath], namespace: namespace)
        let startedAt = ContinuousClock.now
        let process = try spawner.spawn("imagentd", executable, arguments, logPath, logPath, setting)
        let daemon = DaemonHandle(process: process, socketPath: socketPath, logPath: logPath, startedAt: startedAt)
        if waitUntilReady { try await daemon.waitUntilAccepting(within: limit) }
        return daemon
    }

    private init(process: ChildProcess, socketPath: String, logPath: String, startedAt: ContinuousClock.Instant) {
        self.process = process
        self.socketPath = socketPath
        self.logPath = logPath
        self.startedAt = startedAt
    }

    /// Waits until the socket accepts a connection; stops the daemon and throws (with its log) if it does not.
    public func waitUntilAccepting(within limit: Duration = .seconds(30)) async throws {
        let deadline = ContinuousClock.now + limit
        // One probe per turn: once it accepts, the loop ends.
        while !unixSocketAccepts(socketPath), process.isRunning, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        guard unixSocketAccepts(socketPath) else {
            await stop()
            throw ChildProcessError("imagentd does not accept connections on \(socketPath); its log:\n\(tailOfFile(logPath))")
        }
    }

    public func stop(grace: Duration) async { await process.stop(grace: grace) }
}
