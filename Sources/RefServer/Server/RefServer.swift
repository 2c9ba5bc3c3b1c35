import IMLink
import Logging
import NIOCore
import NIOPosix
import NIOSSL

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The reference IMLink/1 server, embeddable in a process (tests, the
/// daemon's development mode) or run by `imagent-refserver`.
///
/// ```swift
/// let server = try await RefServer.start(configuration: .init(tokenFile: path))
/// print(server.port)
/// _ = await server.execute(.stall(true))      // or: await server.execute(line: "stall on")
/// try await server.stop()
/// ```
public final class RefServer: Sendable {
    /// The host the server listens on, as configured.
    public let host: String
    /// The port it listens on: the real one when configured with 0.
    public let port: Int

    private let loop: EventLoop
    private let core: NIOLoopBound<ServerCore>
    private let listener: Channel
    private let adminListener: Channel?
    private let adminSocketPath: String?
    private let storeThread: NIOThreadPool?
    private let logger: Logger

    /// `host:port` as the `listening on` line prints it (IPv6 hosts in brackets).
    public var address: String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    private init(host: String, port: Int, loop: EventLoop, core: NIOLoopBound<ServerCore>, listener: Channel,
                 adminListener: Channel?, adminSocketPath: String?, storeThread: NIOThreadPool?, logger: Logger) {
        self.host = host
        self.port = port
        self.loop = loop
        self.core = core
        self.listener = listener
        self.adminListener = adminListener
        self.adminSocketPath = adminSocketPath
        self.storeThread = storeThread
        self.logger = logger
    }

    /// Loads the state file (if any), binds the listening socket and the admin
    /// socket, and starts serving. The server uses one event loop of `group`.
    public static func start(configuration: RefServerConfiguration,
                             group: EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
                             logger: Logger = Logger(label: "imagent.refserver")) async throws -> RefServer {
        if let problem = configuration.problem { throw RefServerError.invalidConfiguration(problem) }
        let loop = group.next()
        let sslContext = try configuration.tls.map(TLSSetup.makeContext)

        var store: StateStore?
        var stored = StoredState()
        var storeThread: NIOThreadPool?
        if let path = configuration.statePath {
            let opened = try StateStore(path: path)
            stored = try opened.load()
            store = opened
            let thread = NIOThreadPool(numberOfThreads: 1)
            thread.start()
            storeThread = thread
            logger.info("state \(path): \(stored.sessions.count) sessions, \(stored.closed.count) closed")
        }

        let core = try await loop.submit { [store, stored, storeThread] in
            NIOLoopBound(ServerCore(loop: loop, configuration: configuration, logger: logger, store: store,
                                    storeThread: storeThread, stored: stored), eventLoop: loop)
        }.get()

        do {
            let listener = try await ServerBootstrap(group: loop, childGroup: loop)
                // 1,000 agents may connect at once; the kernel queue must hold them.
                .serverChannelOption(.backlog, value: 4096)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        if let sslContext {
                            try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                        }
                        try channel.pipeline.syncOperations.addHandler(ConnectionHandler(core: core.value))
                    }
                }
                .bind(host: configuration.host, port: configuration.port)
                .get()
            guard let port = listener.localAddress?.port else {
                throw RefServerError.bindFailed("\(configuration.host):\(configuration.port) has no local port")
            }

            var adminListener: Channel?
            if let path = configuration.adminSocketPath {
                adminListener = try await ServerBootstrap(group: loop)
                    .childChannelInitializer { channel in
                        channel.eventLoop.makeCompletedFuture {
                            try channel.pipeline.syncOperations.addHandler(AdminLineHandler(core: core.value))
                        }
                    }
                    .bind(unixDomainSocketPath: path, cleanupExistingSocketFile: true)
                    .get()
            }
            try await loop.submit { core.value.startSweep() }.get()
            let server = RefServer(host: configuration.host, port: port, loop: loop, core: core, listener: listener,
                                   adminListener: adminListener, adminSocketPath: configuration.adminSocketPath,
                                   storeThread: storeThread, logger: logger)
            logger.info("listening on \(server.address)\(sslContext == nil ? "" : " (TLS)")")
            return server
        } catch {
            try? await storeThread?.shutdownGracefully()
            throw error
        }
    }

    /// Carries out an admin command and returns its reply line ("ok …" or "error …").
    public func execute(_ command: AdminCommand) async -> String {
        let core = self.core
        do {
            return try await loop.submit { core.value.execute(command) }.get()
        } catch {
            return "error the server is stopped"
        }
    }

    /// Parses and carries out one admin command line, as typed on stdin or the admin socket.
    public func execute(line: String) async -> String {
        do {
            return await execute(try AdminCommand.parse(line))
        } catch {
            return "error \(error)"
        }
    }

    /// Serves admin commands read from `input`, replies written to `output`
    /// (the executable passes duplicates of stdin and stdout). The server owns
    /// both descriptors from now on and closes them when the input ends.
    ///
    /// NIO can poll only pipes, sockets and terminals. When `output` is
    /// something else (stdout redirected to a file or /dev/null) replies are
    /// written to it directly, which never waits for a reader. When `input`
    /// is something else (stdin from /dev/null) there is nothing to serve:
    /// this throws `RefServerError.commandInputNotPollable` and closes both.
    public func serveCommands(input: CInt, output: CInt) async throws {
        guard PollableDescriptor.isPollable(input) else {
            close(input)
            close(output)
            throw RefServerError.commandInputNotPollable
        }
        let core = self.core
        if PollableDescriptor.isPollable(output) {
            _ = try await NIOPipeBootstrap(group: loop)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(AdminLineHandler(core: core.value))
                    }
                }
                .takingOwnershipOfDescriptors(input: input, output: output)
                .get()
        } else {
            let channel = try await NIOPipeBootstrap(group: loop)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(AdminLineHandler(core: core.value, replyDescriptor: output))
                    }
                }
                .takingOwnershipOfDescriptor(input: input)
                .get()
            channel.closeFuture.whenComplete { _ in close(output) }
        }
    }

    /// Stops accepting, closes every connection, waits until every pending
    /// write is committed to the state file, then releases the store.
    public func stop() async throws {
        try? await listener.close()
        if let adminListener {
            try? await adminListener.close()
            if let adminSocketPath { unlink(adminSocketPath) }
        }
        let core = self.core
        try await loop.flatSubmit {
            let core = core.value
            core.stopping = true
            core.sweepTask?.cancel()
            core.cancelPushJobs()
            for handler in core.connections.values { handler.closeSilently() }
            return core.drain()
        }.get()
        try await storeThread?.shutdownGracefully()
        logger.info("stopped")
    }
}

/// Why a server could not start or serve commands.
public enum RefServerError: Error, Hashable, Sendable, CustomStringConvertible {
    case invalidConfiguration(String)
    case bindFailed(String)
    /// `serveCommands` was given an input NIO cannot poll, such as /dev/null.
    case commandInputNotPollable

    public var description: String {
        switch self {
        case .invalidConfiguration(let problem): "invalid configuration: \(problem)"
        case .bindFailed(let problem): "cannot listen: \(problem)"
        case .commandInputNotPollable: "the command input is not a pipe, socket or terminal"
        }
    }
}
