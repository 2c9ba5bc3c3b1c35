#if canImport(Glibc)
import Glibc
#endif

/// An `imagent-refserver` child; ready once it prints the port it listens on.
public final class RefServerHandle: ProgramHandle {
    public let process: ChildProcess
    public let host: String
    public let port: Int
    public let logPath: String
    /// `--admin-socket`, when it was started with one.
    public let adminSocket: String?

    /// `HOST:PORT` for a daemon's `endpoints`.
    public var address: String { "\(host):\(port)" }

    /// Starts the server on `host:port` (0: a free port) with `arguments` besides `--listen`
    /// (`--token-file`, `--state`, `--log-level`…); returns once it listens. Its standard output
    /// (the `listening on` line) goes to `outPath`, its log to `logPath`.
    public static func start(host: String = "127.0.0.1", port: Int = 0, arguments: [String], adminSocket: String? = nil,
                             outPath: String, logPath: String, namespace: String? = nil, binary: String = BuiltPrograms.refserver,
                             spawner: ProgramSpawner = .direct) async throws -> RefServerHandle {
        // A restart appends to the same files: the old `listening on` line must not answer for the new process.
        unlink(outPath)
        let (executable, all) = ProgramSpawner.command(
            binary, ["--listen", "\(host):\(port)"] + arguments + (adminSocket.map { ["--admin-socket", $0] } ?? []),
            namespace: namespace)
        let process = try spawner.spawn("imagent-refserver", executable, all, outPath, logPath, [:])
        do {
            let bound = try await waitForListeningPort(in: outPath, of: process, what: "imagent-refserver", log: logPath)
            return RefServerHandle(process: process, host: host, port: bound, logPath: logPath, adminSocket: adminSocket)
        } catch {
            await process.stop()
            throw error
        }
    }

    private init(process: ChildProcess, host: String, port: Int, logPath: String, adminSocket: String?) {
        self.process = process
        self.host = host
        self.port = port
        self.logPath = logPath
        self.adminSocket = adminSocket
    }

    /// One command on its admin socket; the reply line.
    public func admin(_ command: String) throws(ChildProcessError) -> String {
        guard let adminSocket else { throw ChildProcessError("this imagent-refserver has no --admin-socket") }
        return try unixSocketRequest(adminSocket, command)
    }

    public func stop(grace: Duration) async { await process.stop(grace: grace) }
}
