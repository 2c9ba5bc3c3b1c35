import Foundation
import IMAgentTestKit
import Logging
import NIOPosix
import RefServer

/// The real `imagentd` binary, started as a child process with a
/// configuration file, against an in-process reference server.
final class RealDaemon: @unchecked Sendable {
    let directory: String
    let configPath: String
    let socketPath: String
    let server: RefServer
    let handle: DaemonHandle
    var process: ChildProcess { handle.process }
    var logPath: String { handle.logPath }

    static let binary = URL(fileURLWithPath: BuiltPrograms.daemon)

    /// What a daemon is started with: a folder, a reference server, a configuration file.
    struct Setup {
        var directory: String
        var configPath: String
        var socketPath: String
        var server: RefServer
    }

    /// Writes a configuration for a new in-process reference server.
    /// `socketMode` is `[ipc] mode`: 0666 lets a client of another uid connect (the folder must let it through too).
    /// `serverMaxFrame` is the reference server's MAX_FRAME (nil: its default).
    static func prepare(extraConfig: String = "", socketMode: String = "0600", serverMaxFrame: UInt32? = nil) async throws -> Setup {
        let directory = try FakeDaemon.makeTemporaryDirectory()
        // The server keeps its state in SQLite too, so it can be restarted without loss.
        let tokenFile = directory + "/token"
        try "real-daemon-token\n".write(toFile: tokenFile, atomically: true, encoding: .utf8)
        var serverConfiguration = RefServerConfiguration(tokenFile: tokenFile, statePath: directory + "/refserver.sqlite3")
        if let serverMaxFrame { serverConfiguration.maxFrame = serverMaxFrame }
        let server = try await RefServer.start(configuration: serverConfiguration,
                                               logger: Logger(label: "refserver", factory: { _ in SwiftLogNoOpLogHandler() }))
        let socketPath = directory + "/imagent.sock"
        let configPath = directory + "/imagentd.toml"
        var config = DaemonConfigFile(endpoints: [server.address], tokenFile: tokenFile, socketPath: socketPath,
                                      storeDirectory: directory, agentID: "real-daemon-test")
        config.socketMode = socketMode
        config.extra = extraConfig
        try config.write(to: configPath)
        return Setup(directory: directory, configPath: configPath, socketPath: socketPath, server: server)
    }

    /// Writes a configuration for a reference server, starts the daemon and waits until its socket exists.
    static func start(extraConfig: String = "", socketMode: String = "0600", serverMaxFrame: UInt32? = nil) async throws -> RealDaemon {
        try await launch(try await prepare(extraConfig: extraConfig, socketMode: socketMode, serverMaxFrame: serverMaxFrame))
    }

    /// A new daemon process on the same folder, configuration, store and server (after `kill -9`).
    func restarted() async throws -> RealDaemon {
        try await Self.launch(Setup(directory: directory, configPath: configPath, socketPath: socketPath, server: server))
    }

    static func launch(_ setup: Setup) async throws -> RealDaemon {
        let handle = try await DaemonHandle.start(configPath: setup.configPath, socketPath: setup.socketPath,
                                                  logPath: setup.directory + "/imagentd.log", binary: binary.path,
                                                  within: .seconds(10))
        return RealDaemon(setup: setup, handle: handle)
    }

    private init(setup: Setup, handle: DaemonHandle) {
        (directory, configPath, socketPath, server) = (setup.directory, setup.configPath, setup.socketPath, setup.server)
        self.handle = handle
    }

    var log: String { handle.log }

    /// `imagent --socket <this daemon> ARGUMENTS…`
    func imagent(_ arguments: [String], stdin: String? = nil) async throws -> ImagentProcess.Result {
        try await ImagentProcess.run(["--socket", socketPath] + arguments, stdin: stdin)
    }

    /// Polls `imagent status --json` until the link state is `state`.
    func waitForLink(_ state: String, within limit: Duration = .seconds(15)) async throws -> [String: Any] {
        var last = ""
        let reached = try await poll(within: limit, every: .milliseconds(100)) { () -> [String: Any]? in
            let result = try await imagent(["status", "--json"])
            last = result.stdout + result.stderr
            guard result.status == 0,
                  let status = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any],
                  let link = status["link"] as? [String: Any], link["state"] as? String == state else { return nil }
            return status
        }
        if let reached { return reached }
        throw RealDaemonError("link never reached \(state); last status: \(last)\ndaemon log:\n\(log)")
    }

    func signal(_ number: Int32) {
        kill(process.processIdentifier, number)
    }

    /// Waits for the process to exit by itself, at most `limit`; returns its status or nil.
    func waitForExit(within limit: Duration) async -> Int32? {
        await handle.exit(within: limit)
    }

    /// Stops the daemon and the server; removes the folder unless `keepingFiles` (a failed test's logs).
    func stop(keepingFiles: Bool = false) async {
        await handle.stop()
        try? await server.stop()
        if keepingFiles {
            print("real daemon's files kept in \(directory); its log ends with:\n\(tailOfFile(logPath))")
        } else {
            removeTree(directory)
        }
    }
}

struct RealDaemonError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Runs `body` with a started daemon and always stops it; a failure keeps its folder and prints its log.
func withRealDaemon<Result>(extraConfig: String = "", socketMode: String = "0600", serverMaxFrame: UInt32? = nil,
                            _ body: (RealDaemon) async throws -> Result) async throws -> Result {
    let daemon = try await RealDaemon.start(extraConfig: extraConfig, socketMode: socketMode, serverMaxFrame: serverMaxFrame)
    do {
        let result = try await body(daemon)
        await daemon.stop()
        return result
    } catch {
        await daemon.stop(keepingFiles: true)
        throw error
    }
}
