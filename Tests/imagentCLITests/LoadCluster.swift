import Foundation
import IMAgentTestKit

/// The real processes of an acceptance run: `imagent-refserver` with a
/// `--state` file and an admin socket, `imagentd` against it, and
/// `imagent-loadgen` clients, all from the build directory, in one temporary
/// folder. Each can be killed and restarted; `stop()` ends every process
/// still running and removes the folder.
final class LoadCluster: @unchecked Sendable {
    let processes: ServerAndDaemon
    private var loadgens: [LoadgenHandle] = []
    private var daemon: RealDaemon?
    private let lock = NSLock()

    var directory: String { processes.directory }
    var socketPath: String { processes.socketPath }

    /// Appended to the daemon's configuration (a `[metrics]` table, say).
    private let extraConfig: String

    init(extraConfig: String = "") throws {
        self.extraConfig = extraConfig
        processes = try ServerAndDaemon(directory: try FakeDaemon.makeTemporaryDirectory(), token: "load-token")
    }

    // MARK: Reference server

    /// Starts the reference server: on a free port the first time, on the same port (and state file) after.
    func startServer() async throws {
        try await processes.startServer()
    }

    /// One admin command on the server's admin socket; its reply line.
    func admin(_ command: String) throws -> String {
        try unixSocketRequest(processes.adminSocket, command).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// SIGTERM (the server commits what it holds and exits) or SIGKILL (it commits before it
    /// acknowledges, so nothing acknowledged is lost), then the same port and state file again.
    func restartServer(killing: Bool = false) async throws {
        if let server = processes.server {
            server.signal(killing ? SIGKILL : SIGTERM)
            try await waitForExit(server, within: .seconds(15))
        }
        try await startServer()
    }

    /// SIGTERM the server and wait for it: the link goes down until `startServer()` (same port, same state).
    func stopServer() async throws {
        if let server = processes.server {
            server.signal(SIGTERM)
            try await waitForExit(server, within: .seconds(15))
        }
    }

    /// The daemon's `RssAnon` (/proc/PID/status) in bytes: its heap, not the pages of mapped files.
    func daemonAnonymousRSS() -> Int? {
        guard let daemon = lock.withLock({ daemon?.handle }), daemon.isRunning,
              let status = readFile("/proc/\(daemon.pid)/status"),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("RssAnon:") }),
              let kib = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first.flatMap({ Int($0) }) else { return nil }
        return kib * 1024
    }

    // MARK: Daemon

    /// Starts the daemon: the first time on a new configuration for the server, after on the same files.
    func startDaemon() async throws {
        let started: RealDaemon
        if let daemon = lock.withLock({ daemon }) {
            started = try await daemon.restarted()
        } else {
            let setup = try await RealDaemon.prepare(.external(processes.serverAddress), in: directory, token: "load-token") { config in
                config.agentID = "load-acceptance"
                config.reconnectCapMS = 500
                config.logLevel = "warning"
                config.extra = extraConfig
            }
            started = try await RealDaemon.launch(setup, RealDaemon.Start(readyWithin: .seconds(15)))
        }
        lock.withLock { daemon = started }
    }

    /// `kill -9` the daemon, then start it again on the same store.
    func killAndRestartDaemon() async throws {
        if let daemon = lock.withLock({ daemon }) {
            daemon.signal(SIGKILL)
            try await waitForExit(daemon.handle, within: .seconds(10))
        }
        try await startDaemon()
    }

    // MARK: Load clients

    /// Starts one `imagent-loadgen` against the daemon; `wait` returns its report.
    func startLoadgen(tag: Int, arguments: [String]) throws -> Loadgen {
        let handle = try LoadgenHandle.start(socketPath: socketPath, tag: tag, arguments: arguments,
                                             outPath: directory + "/loadgen-\(tag).out", errPath: directory + "/loadgen-\(tag).err")
        lock.withLock { loadgens.append(handle) }
        return Loadgen(handle: handle)
    }

    struct Loadgen: Sendable {
        let handle: LoadgenHandle

        var process: ChildProcess { handle.process }
        var errPath: String { handle.errPath }
        var isRunning: Bool { handle.isRunning }

        /// Waits for the process to exit (killing it after `limit`) and parses its JSON line.
        func wait(within limit: Duration) async throws -> LoadReport {
            let outcome = try await handle.wait(within: limit)
            guard let line = outcome.report,
                  let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                throw RealDaemonError("imagent-loadgen printed no report (status \(outcome.status)): \(outcome.report ?? "")\n\(outcome.stderr)")
            }
            return LoadReport(json: line, fields: object, status: outcome.status, stderr: outcome.stderr)
        }
    }

    struct LoadReport: Sendable {
        let json: String
        nonisolated(unsafe) let fields: [String: Any]
        let status: Int32
        let stderr: String

        func int(_ key: String) -> Int { (fields[key] as? NSNumber)?.intValue ?? -1 }
        func double(_ key: String) -> Double { (fields[key] as? NSNumber)?.doubleValue ?? -1 }
    }

    // MARK: Clean-up and diagnostics

    /// Ends every process this cluster started that still runs, and removes the folder unless `keepingFiles`.
    func stop(keepingFiles: Bool = false) async {
        let all = lock.withLock { loadgens }
        for loadgen in all where loadgen.isRunning { loadgen.signal(SIGKILL) }
        await lock.withLock({ daemon })?.handle.stop()
        await processes.stop()
        for loadgen in all { await loadgen.kill9() }
        if keepingFiles {
            print("load cluster's files kept in \(directory); imagentd.log ends with:\n\(tail("imagentd.log"))")
        } else {
            removeTree(directory)
        }
    }

    func tail(_ file: String, bytes: Int = 3000) -> String {
        processes.tail(file, bytes: bytes)
    }

    private func waitForExit(_ program: some ProgramHandle, within limit: Duration) async throws {
        if await program.exit(within: limit) == nil {
            throw RealDaemonError("process \(program.pid) did not exit within \(limit)")
        }
    }
}

/// Runs `body` with a new cluster (server and daemon started) and always stops it; a failure keeps the logs.
func withLoadCluster<Result>(extraConfig: String = "", _ body: (LoadCluster) async throws -> Result) async throws -> Result {
    let cluster = try LoadCluster(extraConfig: extraConfig)
    do {
        try await cluster.startServer()
        try await cluster.startDaemon()
        let result = try await body(cluster)
        await cluster.stop()
        return result
    } catch {
        await cluster.stop(keepingFiles: true)
        throw error
    }
}
