import Foundation
import IMAgentTestKit
import Logging
import NIOPosix
import RefServer

/// The one way the tests start an `imagentd` process. It owns the temporary
/// folder and the configuration file (`prepare`, with the `Upstream`: a
/// reference server in this process, or one the caller runs, such as an
/// `imagent-refserver` process, mosquitto or ejabberd), spawns the process
/// through `ChildProcess` as `Start` says (environment, umask, socket
/// activation, another binary), waits until its socket accepts, runs the CLI
/// against it (`imagent`), and cleans up in bounded time (`stop`,
/// `withRealDaemon`). `FakeDaemon` is not a daemon: it is a scripted double
/// of the daemon's socket for CLI tests.
final class RealDaemon: @unchecked Sendable {
    let directory: String
    let configPath: String
    let socketPath: String
    /// The in-process reference server; nil when the upstream is the caller's.
    let server: RefServer!
    let handle: DaemonHandle
    private let start: Start
    var process: ChildProcess { handle.process }
    var logPath: String { handle.logPath }

    static let binary = URL(fileURLWithPath: BuiltPrograms.daemon)

    /// What the daemon's link connects to.
    enum Upstream {
        /// A reference server in this process, its state in the folder; `configure` changes its settings
        /// (MAX_FRAME, HEARTBEAT_MS).
        case referenceServer(configure: (inout RefServerConfiguration) -> Void = { _ in })
        /// One the caller runs (an `imagent-refserver` process, a broker), at `HOST:PORT`.
        case external(String)
    }

    /// What a daemon is started with: a folder, a configuration file, and the reference server if it is the upstream.
    struct Setup {
        var directory: String
        var configPath: String
        var socketPath: String
        var server: RefServer!

        /// Rewrites the configuration file's text: what `DaemonConfigFile` does not write (`[server.tls]`), or a broken file.
        func editConfig(_ edit: (String) -> String) throws {
            try edit(try String(contentsOfFile: configPath, encoding: .utf8)).write(toFile: configPath, atomically: true, encoding: .utf8)
        }

        /// Stops the server and removes the folder (a daemon that never started).
        func discard() async {
            try? await server?.stop()
            removeTree(directory)
        }
    }

    /// How the process is started.
    struct Start {
        /// More environment variables (`NOTIFY_SOCKET`, `WATCHDOG_USEC`).
        var environment: [String: String] = [:]
        /// The daemon's own umask, set by the shell that execs it.
        var umask: String?
        /// As systemd's socket activation: the listening IPC socket made by the test and passed as
        /// descriptor 3 (`LISTEN_FDS=1`, `LISTEN_PID` the daemon's pid). The socket accepts before the
        /// daemon runs, so readiness is the caller's (its `READY=1`, say).
        var socketActivated = false
        var binary = BuiltPrograms.daemon
        /// How long the daemon has to accept on its socket.
        var readyWithin: Duration = .seconds(10)

        func spawner(socketPath: String) -> ProgramSpawner {
            let prologue = umask.map { "umask \($0)" } ?? ":"
            guard socketActivated else { return umask == nil ? .direct : .throughShell(prologue) }
            return ProgramSpawner { name, executable, arguments, stdout, stderr, setting in
                // Made after DaemonHandle removed a stale socket file, closed once the child has its copy.
                let listener = try makeUnixSocket(type: Int32(SOCK_STREAM.rawValue), path: socketPath, listen: true)
                defer { close(listener) }
                return try ProgramSpawner.throughShell(prologue + "\nexec 3<&0 0</dev/null; export LISTEN_PID=$$ LISTEN_FDS=1",
                                                       stdin: .descriptor(listener))
                    .spawn(name, executable, arguments, stdout, stderr, setting)
            }
        }
    }

    /// Writes a configuration for a new in-process reference server.
    /// `socketMode` is `[ipc] mode`: 0666 lets a client of another uid connect (the folder must let it through too).
    /// `serverMaxFrame` is the reference server's MAX_FRAME (nil: its default).
    static func prepare(extraConfig: String = "", socketMode: String = "0600", serverMaxFrame: UInt32? = nil) async throws -> Setup {
        try await prepare(.referenceServer { if let serverMaxFrame { $0.maxFrame = serverMaxFrame } }) { config in
            config.socketMode = socketMode
            config.extra = extraConfig
        }
    }

    /// Writes `token` and a configuration for `upstream` (the suite's fast timing, changed by `configure`) in
    /// `directory` (nil: a new temporary folder), and starts the reference server if it is the upstream.
    static func prepare(_ upstream: Upstream, in directory: String? = nil, token: String = "real-daemon-token",
                        configure: (inout DaemonConfigFile) -> Void = { _ in }) async throws -> Setup {
        let ownsFolder = directory == nil
        let directory = try directory ?? makeTemporaryDirectory(prefix: "imagent-test")
        var setup = Setup(directory: directory, configPath: directory + "/imagentd.toml", socketPath: directory + "/imagent.sock")
        do {
            let tokenFile = directory + "/token"
            try writeFile(tokenFile, token + "\n")
            let endpoint: String
            switch upstream {
            case .referenceServer(let change):
                // The server keeps its state in SQLite too, so it can be restarted without loss.
                var serverConfiguration = RefServerConfiguration(tokenFile: tokenFile, statePath: directory + "/refserver.sqlite3")
                change(&serverConfiguration)
                setup.server = try await RefServer.start(configuration: serverConfiguration,
                                                         logger: Logger(label: "refserver", factory: { _ in SwiftLogNoOpLogHandler() }))
                endpoint = setup.server.address
            case .external(let address):
                endpoint = address
            }
            var config = DaemonConfigFile(endpoints: [endpoint], tokenFile: tokenFile, socketPath: setup.socketPath,
                                          storeDirectory: directory, agentID: "real-daemon-test")
            configure(&config)
            setup.socketPath = config.socketPath
            try config.write(to: setup.configPath)
            return setup
        } catch {
            try? await setup.server?.stop()
            if ownsFolder { removeTree(directory) }
            throw error
        }
    }

    /// Writes a configuration for a reference server, starts the daemon and waits until its socket exists.
    static func start(extraConfig: String = "", socketMode: String = "0600", serverMaxFrame: UInt32? = nil) async throws -> RealDaemon {
        try await launch(try await prepare(extraConfig: extraConfig, socketMode: socketMode, serverMaxFrame: serverMaxFrame))
    }

    /// A new daemon process on the same folder, configuration, store and server, started the same way (after `kill -9`).
    func restarted() async throws -> RealDaemon {
        try await Self.launch(Setup(directory: directory, configPath: configPath, socketPath: socketPath, server: server), start)
    }

    /// Starts the daemon on `setup` and, unless socket-activated, returns once its socket accepts.
    static func launch(_ setup: Setup, _ start: Start = Start()) async throws -> RealDaemon {
        let handle = try await DaemonHandle.start(configPath: setup.configPath, socketPath: setup.socketPath,
                                                  logPath: setup.directory + "/imagentd.log", binary: start.binary,
                                                  setting: start.environment, waitUntilReady: !start.socketActivated,
                                                  within: start.readyWithin, spawner: start.spawner(socketPath: setup.socketPath))
        return RealDaemon(setup: setup, handle: handle, start: start)
    }

    private init(setup: Setup, handle: DaemonHandle, start: Start) {
        (directory, configPath, socketPath, server) = (setup.directory, setup.configPath, setup.socketPath, setup.server)
        self.handle = handle
        self.start = start
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
        try? await server?.stop()
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

/// A process started beside the daemon (a broker, a backend): stopped before it, its log printed when a test fails.
protocol Companion: AnyObject {
    var name: String { get }
    var log: String { get }
    func stop()
}

/// Runs `body` with a started daemon and always stops it; a failure keeps its folder and prints its log.
func withRealDaemon<Result>(extraConfig: String = "", socketMode: String = "0600", serverMaxFrame: UInt32? = nil,
                            _ body: (RealDaemon) async throws -> Result) async throws -> Result {
    try await withRealDaemon(try await RealDaemon.prepare(extraConfig: extraConfig, socketMode: socketMode, serverMaxFrame: serverMaxFrame)) {
        try await body($0)
    }
}

/// Starts the daemon on `setup` as `start` says, runs `body` with it (which may replace it with a restarted one),
/// then stops `companions` and the daemon whatever happens; a failure keeps the folder and prints every log's end.
/// If the daemon does not start, the companions are stopped and the folder removed.
func withRealDaemon<Result>(_ setup: RealDaemon.Setup, _ start: RealDaemon.Start = RealDaemon.Start(), companions: [any Companion] = [],
                            _ body: (inout RealDaemon) async throws -> Result) async throws -> Result {
    var daemon: RealDaemon
    do {
        daemon = try await RealDaemon.launch(setup, start)
    } catch {
        companions.forEach { $0.stop() }
        await setup.discard()
        throw error
    }
    do {
        let result = try await body(&daemon)
        companions.forEach { $0.stop() }
        await daemon.stop()
        return result
    } catch {
        for companion in companions { print("\(companion.name) log ends with:\n\(companion.log.suffix(3000))") }
        companions.forEach { $0.stop() }
        await daemon.stop(keepingFiles: true)
        throw error
    }
}
