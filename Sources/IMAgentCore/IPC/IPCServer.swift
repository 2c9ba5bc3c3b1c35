import AgentIPC
import Logging
import NIOCore
import NIOPosix

/// The Unix-socket listener for Agent IPC/1: binds the configured path (or
/// adopts the socket systemd passed) and the admin socket beside it, reads
/// each client's credentials from the kernel, and gives every client its own
/// pipeline on the daemon's loop.
final class IPCServer: Sendable {
    struct Settings: Sendable {
        var socketPath: String
        var mode: UInt32
        var group: String
        var adminGroup: String
        var maxPayload: UInt32
        /// Connections counted from accept: all users (`max_clients`) and per uid.
        var maxConnections: Int
        var maxConnectionsPerUID: Int
        /// A listening socket passed by systemd (`LISTEN_FDS`); nil: bind `socketPath`.
        var adoptedDescriptor: CInt?
    }

    private let channel: Channel
    let socketPath: String
    private let ownsSocketFile: Bool
    /// `<socket>.admin`, always the daemon's own file; nil when it could not be bound.
    private let admin: (channel: Channel, path: String)?
    private let limits: NIOLoopBoundBox<ConnectionLimits>

    private init(channel: Channel, socketPath: String, ownsSocketFile: Bool, admin: (channel: Channel, path: String)?,
                 limits: NIOLoopBoundBox<ConnectionLimits>) {
        self.channel = channel
        self.socketPath = socketPath
        self.ownsSocketFile = ownsSocketFile
        self.admin = admin
        self.limits = limits
    }

    /// New connection limits from a reload; connections already accepted stay. On the loop.
    func updateLimits(maxConnections: Int, perUID: Int) {
        limits.value.total = ConnectionLimits.effectiveTotal(configured: maxConnections)
        limits.value.perUID = perUID
    }

    /// Starts listening. `daemon` is only touched on `eventLoop`.
    static func start(settings: Settings, eventLoop: EventLoop, daemon: NIOLoopBound<any IPCRequestHandler>,
                      logger: Logger) async throws -> IPCServer {
        let policy = AdminPolicy(adminGroup: settings.adminGroup)
        let nextID = try await eventLoop.submit { NIOLoopBoundBox<UInt64>(0, eventLoop: eventLoop) }.get()
        let unsent = try await eventLoop.submit { NIOLoopBound(UnsentReplies(), eventLoop: eventLoop) }.get()
        let total = ConnectionLimits.effectiveTotal(configured: settings.maxConnections)
        let limits = try await eventLoop.submit {
            NIOLoopBoundBox(ConnectionLimits(total: total, perUID: settings.maxConnectionsPerUID), eventLoop: eventLoop)
        }.get()
        // One for each socket: the admin socket's connections may also take the places kept for admins.
        func bootstrap(viaAdminSocket: Bool) -> ServerBootstrap {
            ServerBootstrap(group: eventLoop)
                // Short: a connect queued behind thousands would wait for all of them.
                .serverChannelOption(.backlog, value: 256)
                // Accepts in small batches: each accepted connection costs a turn of the loop some
                // work (its registration, credentials, a refusal), so a socket that always has more
                // waiting (a flood) holds the loop for 8 of them before the clients' requests and the
                // other socket's accepts get their turn, not for 64.
                .serverChannelOption(.maxMessagesPerRead, value: UInt(ConnectionLimits.acceptBatch))
                // And while the main socket brings only connections to refuse, it waits between batches.
                .serverChannelInitializer { server in
                    server.eventLoop.makeCompletedFuture {
                        if !viaAdminSocket { try server.pipeline.syncOperations.addHandler(AcceptPacer(limits: limits)) }
                    }
                }
                .childChannelOption(.writeBufferWaterMark, value: .init(low: 64 << 10, high: 1 << 20))
                // Each channel keeps its receive buffer for the next read. NIO's default
                // starts it at 2 KiB, which every idle client then holds for a few
                // hundred bytes of HELLO; starting at 256 bytes, a busy client's
                // buffer doubles per full read up to the same 64 KiB.
                .childChannelOption(.recvAllocator, value: AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 256, maximum: 65_536))
                .childChannelInitializer { channel in
                    PeerCredentials.of(channel).flatMapThrowing { peer in
                        if let refusal = limits.value.admit(uid: peer.uid, viaAdminSocket: viaAdminSocket) {
                            refuse(channel, refusal)
                            return
                        }
                        channel.closeFuture.whenComplete { _ in limits.value.release(uid: peer.uid) }
                        nextID.value += 1
                        let client = IPCClientConnection(id: nextID.value, peer: peer, policy: policy, channel: channel,
                                                         unsent: unsent.value)
                        let handlers: [ChannelHandler] = [
                            ByteToMessageHandler(IPCServerFrameDecoder(maxPayload: settings.maxPayload, client: client)),
                            IPCClientHandler(client: client, daemon: daemon.value, logger: logger),
                        ]
                        try channel.pipeline.syncOperations.addHandlers(handlers)
                    }
                }
        }

        if let descriptor = settings.adoptedDescriptor {
            let channel = try await bootstrap(viaAdminSocket: false).withBoundSocket(descriptor).get()
            logger.info("serving IPC on the socket systemd passed", metadata: ["socket": "\(settings.socketPath)"])
            // The admin socket goes beside the socket systemd bound, wherever its unit put it.
            let path = channel.localAddress?.pathname ?? settings.socketPath
            let admin = await bindAdminSocket(bootstrap(viaAdminSocket: true), beside: path, policy: policy, logger: logger)
            return IPCServer(channel: channel, socketPath: settings.socketPath, ownsSocketFile: false, admin: admin, limits: limits)
        }
        try SocketPath.prepare(settings.socketPath)
        let channel = try await bootstrap(viaAdminSocket: false).bind(unixDomainSocketPath: settings.socketPath).get()
        if let problem = SocketPath.setPermissions(settings.socketPath, mode: settings.mode, group: settings.group) {
            logger.warning("\(problem)")
        }
        logger.info("serving IPC", metadata: ["socket": "\(settings.socketPath)"])
        let admin = await bindAdminSocket(bootstrap(viaAdminSocket: true), beside: settings.socketPath, policy: policy, logger: logger)
        return IPCServer(channel: channel, socketPath: settings.socketPath, ownsSocketFile: true, admin: admin, limits: limits)
    }

    /// Binds `<socket>.admin` for root, the daemon's user and the admin group: a listen queue
    /// of their own, which other users cannot connect to and so cannot fill, however many
    /// connections they make to the main socket. Its clients are served exactly as the main
    /// socket's (the same caps; rights from their credentials, not from the socket). Without
    /// it (a path too long, say) admins share the main socket's queue, as before.
    private static func bindAdminSocket(_ bootstrap: ServerBootstrap, beside socket: String, policy: AdminPolicy,
                                        logger: Logger) async -> (channel: Channel, path: String)? {
        let path = IPCSocketPath.adminPath(for: socket)
        do {
            try SocketPath.prepare(path)
            let channel = try await bootstrap.bind(unixDomainSocketPath: path).get()
            if let problem = SocketPath.restrictToAdmins(path, adminGroupID: policy.adminGroupID) {
                logger.warning("\(problem)")
            }
            logger.info("serving IPC for admins", metadata: ["socket": "\(path)"])
            return (channel, path)
        } catch {
            logger.warning("no admin socket at \(path) (\(error)); root and admins connect through \(socket), behind everyone else")
            return nil
        }
    }

    /// A connection beyond the limits: one ERROR LIMIT_REACHED and closed at
    /// once, before it holds any buffer or timer; written as bytes, without a
    /// pipeline, and never read from.
    private static func refuse(_ channel: Channel, _ text: String) {
        var bytes = channel.allocator.buffer(capacity: 64 + text.utf8.count)
        IPCFrame(request: 0, message: .error(.init(code: .limitReached, message: text))).encode(into: &bytes)
        channel.writeAndFlush(bytes).whenComplete { _ in channel.close(promise: nil) }
    }

    /// Stops accepting; connected clients are closed by the daemon.
    func stop() async {
        try? await channel.close()
        if ownsSocketFile { _ = unlink(socketPath) }
        if let admin {
            try? await admin.channel.close()
            _ = unlink(admin.path)
        }
    }
}
