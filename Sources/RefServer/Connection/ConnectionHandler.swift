import IMLink
import Logging
import NIOCore

/// The thin channel handler for one agent connection: turns bytes into frames
/// for `ConnectionStateMachine`, performs the actions it returns, and carries
/// out the server's orders (write, close, stall, black-hole).
///
/// Frames are parsed here with `FrameParser` rather than a separate
/// `ByteToMessageHandler`, because the inbound limit changes after HELLO_OK
/// and because a black-holed connection must drop bytes before parsing them.
final class ConnectionHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// How long a connection closed for a fatal error drains the agent's input before closing for good.
    static let closeLinger = TimeAmount.seconds(2)

    private let core: ServerCore
    private var machine: ConnectionStateMachine
    private var context: ChannelHandlerContext?
    private var received: ByteBuffer?
    private var inboundLimit = FrameHeader.defaultMaxBody
    /// A `read` the stall knob held back.
    private var readPending = false

    private(set) var id = ConnectionID(rawValue: 0)
    private(set) var lastReceived = NIODeadline.now()
    private(set) var lastSent = NIODeadline.now()
    private(set) var blackHoledSince: NIODeadline?
    /// HEARTBEAT_MS this agent was given in LOGIN_OK.
    private(set) var heartbeatMS: UInt32?
    /// The agent logged in on this connection; kept past closing, for the server's bookkeeping.
    private var loggedInAgent: String?
    /// The `drop-after` knob: frames left before the connection is closed.
    var framesUntilDrop: Int?

    init(core: ServerCore) {
        self.core = core
        self.machine = ConnectionStateMachine(serverFeatures: ServerCore.features, serverMaxFrame: core.configuration.maxFrame)
    }

    var negotiated: ConnectionStateMachine.Negotiated? { machine.established }
    var isWritable: Bool { context?.channel.isWritable ?? false }

    // MARK: Channel events

    func channelActive(context: ChannelHandlerContext) {
        self.context = context
        id = core.connectionOpened(self)
        lastReceived = .now()
        lastSent = .now()
        core.logger.debug("connection \(id) from \(context.remoteAddress.map { "\($0)" } ?? "unknown")")
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        core.logger.debug("connection \(id) closed")
        machine.closing()
        core.connectionClosed(id, agentID: loggedInAgent)
        self.context = nil
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        lastReceived = .now()
        guard blackHoledSince == nil else { return }
        var bytes = unwrapInboundIn(data)
        var buffer: ByteBuffer
        if var pending = received {
            pending.writeBuffer(&bytes)
            buffer = pending
        } else {
            buffer = bytes
        }
        received = nil
        process(&buffer)
    }

    /// Parses and handles every whole frame in `buffer`; keeps the rest for the next read.
    private func process(_ buffer: inout ByteBuffer) {
        // The read that was already requested when stall came on delivers
        // bytes anyway: they wait here, unparsed, until stall goes off.
        while isReading && !core.isStalled {
            let frame: Frame?
            do {
                frame = try FrameParser.parse(&buffer, maxBody: inboundLimit)
            } catch {
                perform(machine.decodingFailed(error))
                return
            }
            guard let frame else { break }
            core.statistics.framesIn += 1
            if case .data(let data) = frame, data.session == core.knobs.dropOnDataSession {
                core.logger.info("connection \(id) received DATA of session \(data.session) (drop-on-data): closing it")
                closeSilently()
                return
            }
            perform(machine.received(frame))
            if let remaining = framesUntilDrop {
                framesUntilDrop = remaining - 1
                if remaining <= 1 {
                    core.logger.info("connection \(id) reached its drop-after count: closing it")
                    closeSilently()
                }
            }
        }
        if isReading, buffer.readableBytes > 0 {
            buffer.discardReadBytes()
            received = buffer
        }
    }

    /// False once the connection is closing or black-holed: later bytes mean nothing.
    private var isReading: Bool {
        context != nil && blackHoledSince == nil && machine.phase != .closing
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { core.scheduleFlush() }
        context.fireChannelWritabilityChanged()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        core.logger.debug("connection \(id) failed: \(error)")
        context.close(promise: nil)
    }

    func read(context: ChannelHandlerContext) {
        if core.isStalled {
            readPending = true
        } else {
            context.read()
        }
    }

    // MARK: Orders from the server

    func write(_ frame: Frame, promise: EventLoopPromise<Void>? = nil) {
        guard let context, blackHoledSince == nil else {
            promise?.succeed()
            return
        }
        var buffer = context.channel.allocator.buffer(capacity: FrameHeader.size + 64)
        if case .data(let data) = frame {
            // Header and body go out as two buffers in one gathering write: the body is not copied.
            data.encodeHeader(into: &buffer)
            context.write(wrapOutboundOut(buffer), promise: nil)
            context.write(wrapOutboundOut(data.body), promise: promise)
            core.statistics.messagesOut += 1
        } else {
            frame.encode(into: &buffer)
            context.write(wrapOutboundOut(buffer), promise: promise)
        }
        core.statistics.framesOut += 1
        lastSent = .now()
    }

    func flush() {
        context?.flush()
    }

    /// Closes without another frame: dropped, replaced, black hole expired.
    func closeSilently() {
        machine.closing()
        context?.close(promise: nil)
    }

    /// The stall knob was turned off: handle what arrived meanwhile, and deliver the read it held back.
    func resumeReading() {
        if var buffer = received {
            received = nil
            process(&buffer)
        }
        guard readPending, let context else { return }
        readPending = false
        context.read()
    }

    /// From now on, discard everything both ways, like a NAT that forgot the mapping.
    func blackHole(since now: NIODeadline) {
        blackHoledSince = now
        received = nil
    }

    // MARK: Actions

    private func perform(_ action: ConnectionStateMachine.Action) {
        guard let context else { return }
        switch action {
        case .none:
            break
        case .send(let frame):
            write(frame)
            flush()
        case .acceptHello(let helloOK, let limit):
            write(.helloOK(helloOK))
            flush()
            inboundLimit = limit
        case .authenticate(let login):
            switch core.authenticate(login, connection: id) {
            case .accepted(let heartbeatMS, let serverTimeMS):
                self.heartbeatMS = heartbeatMS
                loggedInAgent = login.agentID
                let advertised = core.knobs.advertisedHeartbeatMS ?? heartbeatMS
                perform(machine.loginAccepted(heartbeatMS: advertised, serverTimeMS: serverTimeMS))
            case .rejected(let failure):
                perform(machine.loginRejected(failure))
            }
        case .session(let frame):
            guard let negotiated = machine.established else {
                preconditionFailure("session frames are passed on only in the established phase")
            }
            if let (code, message) = core.handle(frame, from: id, negotiated: negotiated) {
                perform(machine.violation(code, message))
            }
        case .sendAndClose(let frame):
            if case .error(let error) = frame {
                core.statistics.protocolErrors += 1
                core.logger.info("connection \(id): closing with ERROR \(error.code): \(error.message ?? "")")
            }
            received = nil
            let channel = context.channel
            let written = context.eventLoop.makePromise(of: Void.self)
            // Once the frame is on the wire, half-close and keep reading (and
            // discarding) for a moment: closing with unread input makes the
            // kernel send RST, which can destroy the frame before the agent reads it.
            written.futureResult
                .flatMap { channel.close(mode: .output) }
                .whenFailure { _ in channel.close(promise: nil) }
            context.eventLoop.scheduleTask(in: Self.closeLinger) { channel.close(promise: nil) }
            write(frame, promise: written)
            flush()
        case .close:
            received = nil
            context.close(promise: nil)
        }
    }
}
