import AgentIPC
import Logging
import NIOCore

/// Translates one client channel's frames into calls on the daemon: enforces
/// HELLO first, answers decode errors with ERROR and closes that client only.
final class IPCClientHandler: ChannelInboundHandler {
    typealias InboundIn = IPCFrame

    private let client: IPCClientConnection
    private let daemon: IPCRequestHandler
    private let logger: Logger
    private var helloDeadline: Scheduled<Void>?

    /// How long a connection may take to complete HELLO before it is closed:
    /// an idle, un-greeted connection is not counted against `max_clients`.
    static let helloTimeout: TimeAmount = .seconds(10)

    init(client: IPCClientConnection, daemon: IPCRequestHandler, logger: Logger) {
        self.client = client
        self.daemon = daemon
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let client = self.client
        let logger = self.logger
        let eventLoop = context.eventLoop
        helloDeadline = context.eventLoop.assumeIsolated().scheduleTask(in: Self.helloTimeout) {
            guard !client.greeted else { return }
            OutsideLog.shared.log(.noHello, from: .uid(client.peer.uid), metadata: ["client": "\(client.label)"],
                                  to: logger, eventLoop: eventLoop)
            client.closeWithError(.badRequest, "no HELLO within \(Self.helloTimeout.nanoseconds / 1_000_000_000) seconds")
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        helloDeadline?.cancel()
        helloDeadline = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        guard client.greeted else {
            greet(frame)
            return
        }
        guard frame.message.op.direction == .request else {
            refuse(request: frame.request, .badRequest, "\(frame.message.op) is not a request a client may send")
            return
        }
        if case .hello = frame.message {
            refuse(request: frame.request, .badRequest, "HELLO was already sent on this connection")
            return
        }
        daemon.handle(frame.message, request: frame.request, from: client)
    }

    private func greet(_ frame: IPCFrame) {
        guard case .hello(let hello) = frame.message else {
            refuse(request: frame.request, .badRequest, "the first frame on a connection must be HELLO, not \(frame.message.op)")
            return
        }
        guard hello.ipcVersion == 1 else {
            refuse(request: frame.request, .versionUnsupported, "this daemon speaks IPC version 1, not \(hello.ipcVersion)")
            return
        }
        client.name = hello.clientName ?? ""
        if let (code, text) = daemon.clientGreeted(client) {
            refuse(request: frame.request, code, text)
            return
        }
        client.greeted = true
        helloDeadline?.cancel()
        helloDeadline = nil
        logger.debug("client connected", metadata: ["client": "\(client.label)"])
        client.reply(to: frame.request, .welcome(daemon.welcome))
    }

    private func refuse(request: UInt32, _ code: IPCErrorCode, _ text: String) {
        OutsideLog.shared.log(.protocolViolation, from: .uid(client.peer.uid),
                              metadata: ["client": "\(client.label)", "error": "\(LogText.bounded(text))"],
                              to: logger, eventLoop: client.eventLoop)
        client.closeWithError(request: request, code, text)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        if let error = error as? IPCError {
            refuse(request: error.request, error.code, error.description)
        } else {
            logger.debug("client connection failed", metadata: ["client": "\(client.label)", "error": "\(error)"])
            context.close(promise: nil)
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        // Frames that arrived while the client was not reading wait in the decoder: an empty
        // read from the head of the pipeline makes it decode them (more may never come).
        if context.channel.isWritable, client.resumeAfterWritable() {
            context.pipeline.syncOperations.fireChannelRead(NIOAny(context.channel.allocator.buffer(capacity: 0)))
        }
        if context.channel.isWritable, client.greeted { daemon.clientCanReceive(client) }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        if client.greeted { daemon.clientDisconnected(client) }
        context.fireChannelInactive()
    }
}
