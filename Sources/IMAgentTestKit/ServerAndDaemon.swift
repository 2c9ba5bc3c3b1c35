import Synchronization

/// An `imagent-refserver` child (its state in a file, an admin socket) and an
/// `imagentd` child against it, in one folder: what the chaos run's `Cluster`
/// is built on (the acceptance tests' `LoadCluster` takes its server; their
/// daemon is a `RealDaemon`). The server restarts on the same port and state,
/// the daemon on the same store and socket.
public final class ServerAndDaemon: Sendable {
    public let directory: String
    public let socketPath: String
    public let tokenPath: String
    public let serverHost: String
    private let serverNamespace: String?
    private let spawner: ProgramSpawner
    private let state = Mutex<(server: RefServerHandle?, daemon: DaemonHandle?, port: Int)>((nil, nil, 0))

    /// Writes `token` to the folder's token file; nothing starts yet.
    public init(directory: String, token: String, serverHost: String = "127.0.0.1", serverNamespace: String? = nil,
                spawner: ProgramSpawner = .direct) throws(ChildProcessError) {
        self.directory = directory
        socketPath = directory + "/imagent.sock"
        tokenPath = directory + "/token"
        self.serverHost = serverHost
        self.serverNamespace = serverNamespace
        self.spawner = spawner
        try writeFile(tokenPath, token + "\n")
    }

    public var server: RefServerHandle? { state.withLock { $0.server } }
    public var daemon: DaemonHandle? { state.withLock { $0.daemon } }
    /// The server's port: 0 until it first started, the same one after.
    public var serverPort: Int { state.withLock { $0.port } }
    public var serverAddress: String { "\(serverHost):\(serverPort)" }
    public var adminSocket: String { directory + "/admin.sock" }

    /// Starts the server: on a free port the first time, on the same port and state file after; returns once it listens.
    public func startServer(logLevel: String = "warning") async throws {
        let started = try await RefServerHandle.start(
            host: serverHost, port: serverPort,
            arguments: ["--token-file", tokenPath, "--state", directory + "/refserver.sqlite3", "--log-level", logLevel],
            adminSocket: adminSocket, outPath: directory + "/refserver.out", logPath: directory + "/refserver.log",
            namespace: serverNamespace, spawner: spawner)
        state.withLock { $0 = (started, $0.daemon, started.port) }
    }

    /// Starts `imagentd --config CONFIG` (in `namespace`, if given); returns once its socket accepts.
    public func startDaemon(configPath: String, namespace: String? = nil, within limit: Duration = .seconds(30)) async throws {
        let started = try await DaemonHandle.start(configPath: configPath, socketPath: socketPath, logPath: directory + "/imagentd.log",
                                                   namespace: namespace, within: limit, spawner: spawner)
        state.withLock { $0.daemon = started }
    }

    /// SIGTERM the daemon and the server (SIGKILL after 5 s) and wait for them.
    public func stop() async {
        await daemon?.stop()
        await server?.stop()
    }

    /// The last `bytes` of one of the folder's files (`imagentd.log`, `refserver.log`).
    public func tail(_ file: String, bytes: Int = 3000) -> String {
        tailOfFile(directory + "/" + file, bytes: bytes)
    }
}
