import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One Unix-socket connection to the daemon: connects, and turns requests
/// into awaited replies. Knows frames, not what they mean; `IPCClient` does.
struct IPCConnection: Sendable {
    let channel: any Channel
    let handler: NIOLoopBound<IPCClientChannelHandler>
    let socketPath: IPCSocketPath

    /// Connects, mapping the system's refusals to errors that say what to do.
    static func connect(to socketPath: IPCSocketPath, timeout: Duration?) async throws -> IPCConnection {
        let bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout((timeout ?? .seconds(30)).timeAmount)
        let connected: Connected
        if let admin = await adminChannel(bootstrap, socketPath) {
            connected = admin
        } else {
            connected = try await mainChannel(bootstrap, socketPath, timeout)
        }
        return IPCConnection(channel: connected.channel, handler: connected.handler, socketPath: socketPath)
    }

    private typealias Connected = (channel: any Channel, handler: NIOLoopBound<IPCClientChannelHandler>)

    /// Connects to `path`, keeping the handler the channel was made with: a daemon that refuses
    /// the connection (LIMIT_REACHED at accept) may close it before the connect returns, and a
    /// closed channel's pipeline no longer holds the handler, which keeps the refusal's ERROR.
    private static func connect(_ bootstrap: ClientBootstrap, _ path: String) async throws -> Connected {
        try await bootstrap.connect(unixDomainSocketPath: path) { channel in
            channel.eventLoop.makeCompletedFuture {
                let handler = IPCClientChannelHandler(channel: channel)
                try channel.pipeline.syncOperations.addHandler(handler)
                return (channel, NIOLoopBound(handler, eventLoop: channel.eventLoop))
            }
        }
    }

    /// The admin socket, when this user may connect to it: root, the daemon's user and its
    /// admins never queue behind other users' connections. Anyone else (no permission), an
    /// older daemon (no such file) or a crashed one (refused) is told so at once: nil.
    private static func adminChannel(_ bootstrap: ClientBootstrap, _ socketPath: IPCSocketPath) async -> Connected? {
        try? await connect(bootstrap, socketPath.adminPath)
    }

    private static func mainChannel(_ bootstrap: ClientBootstrap, _ socketPath: IPCSocketPath,
                                    _ timeout: Duration?) async throws -> Connected {
        let connected: Connected
        // EAGAIN on a Unix socket means the daemon's accept queue is full for the moment (a burst of
        // connections, or another user flooding it): a blocking connect would wait, so this retries
        // for up to `backlogPatience` instead of failing at once.
        let giveUp = ContinuousClock.now + min(timeout ?? backlogPatience, backlogPatience)
        var pause = Duration.milliseconds(1)
        while true {
            do {
                connected = try await connect(bootstrap, socketPath.path)
                break
            } catch where errnoCode(of: error) == EAGAIN && ContinuousClock.now < giveUp {
                try await Task.sleep(for: pause)
                pause = min(pause * 2, .milliseconds(4))
            } catch {
                throw Self.connectError(error, socketPath: socketPath)
            }
        }
        return connected
    }

    var events: IPCEvents {
        get async throws {
            let handler = handler
            return try await channel.eventLoop.submit { handler.value.eventSequence }.get()
        }
    }

    /// Sends `message` with a fresh request id and returns the reply, `ERROR`
    /// included. Cancelling the task fails the request with `CancellationError`;
    /// a reply that comes later is dropped.
    func exchange(_ message: IPCMessage, timeout: Duration?) async throws -> IPCMessage {
        // A task cancelled already would run the cancellation handler before
        // the request exists, and then wait for the reply regardless.
        try Task.checkCancellation()
        let promise = channel.eventLoop.makePromise(of: IPCMessage.self)
        let handler = handler
        return try await withTaskCancellationHandler {
            channel.eventLoop.execute {
                handler.value.send(message, replyPromise: promise, timeout: timeout)
            }
            return try await promise.futureResult.get()
        } onCancel: {
            channel.eventLoop.execute {
                handler.value.cancel(replyPromise: promise, with: CancellationError())
            }
        }
    }

    /// Hands `message` to the connection now, without waiting: requests
    /// started one after another from one task are written in that order.
    /// The future completes with the reply, `ERROR` included.
    func start(_ message: IPCMessage, timeout: Duration?) -> EventLoopFuture<IPCMessage> {
        let promise = channel.eventLoop.makePromise(of: IPCMessage.self)
        let handler = handler
        channel.eventLoop.execute {
            handler.value.send(message, replyPromise: promise, timeout: timeout)
        }
        return promise.futureResult
    }

    /// Sends `message` with request 0 and returns once it is written.
    func post(_ message: IPCMessage) async throws {
        let promise = channel.eventLoop.makePromise(of: Void.self)
        let handler = handler
        channel.eventLoop.execute {
            handler.value.post(message, writtenPromise: promise)
        }
        try await promise.futureResult.get()
    }

    func setMaxPayload(_ value: UInt32) async throws {
        let handler = handler
        try await channel.eventLoop.submit { handler.value.setMaxPayload(value) }.get()
    }

    func close() async {
        let handler = handler
        try? await channel.eventLoop.submit { handler.value.closeByUser() }.get()
        try? await channel.closeFuture.get()
    }

    /// How long a connect keeps trying while the daemon's accept queue is full.
    static let backlogPatience: Duration = .seconds(5)

    private static func errnoCode(of error: any Error) -> CInt? {
        switch error {
        case let error as IOError: error.errnoCode
        case let error as NIOConnectionError:
            error.connectionErrors.lazy.compactMap { ($0.error as? IOError)?.errnoCode }.first
        default: nil
        }
    }

    private static func connectError(_ error: any Error, socketPath: IPCSocketPath) -> IPCClientError {
        switch errnoCode(of: error) {
        case ENOENT, ENOTDIR:
            return .daemonNotRunning(socketPath: socketPath.path, alsoTried: socketPath.alsoTried)
        case ECONNREFUSED:
            return .daemonNotListening(socketPath: socketPath.path)
        case EACCES, EPERM:
            return .permissionDenied(socketPath: socketPath.path)
        default:
            return .connectFailed(socketPath: socketPath.path, reason: "\(error)")
        }
    }
}
