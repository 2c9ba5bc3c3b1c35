import IMLink
import Logging
import MQTT5
import NIOCore

/// What outlives one MQTT connection of an engine: the seqs the broker took
/// (OPEN_OK's LAST_ACKED on the next link), and the largest DATA body the
/// broker's Maximum Packet Size allows on the current one. On the loop only.
final class MQTTLinkMemory {
    var lastAcked: [UInt64: UInt64] = [:]
    var noSubscriberStreak = 0
    var maxBody: UInt32?
    /// What the broker granted at the last CONNACK of this engine (STATUS), nil before the first.
    var granted: MQTTBrokerGrant?
}

/// Why the adapter closes a connection (reported to the engine as the channel's error).
struct MQTTLinkFailure: Error, CustomStringConvertible {
    var description: String
}

/// The channel's side of `MQTTLinkAdapter`: below it MQTT packets in and bytes
/// out, above it the IMLink frames the engine reads and writes. It performs the
/// adapter's outputs and decides nothing.
///
/// Packets are encoded here, into one buffer that goes down the pipeline at the
/// flush (or every `handOverBytes`): one write per turn of the loop, not one
/// trip through an encoder and a buffer of its own per packet. A payload of
/// `handOverBytes` or more is not copied in: it follows as a buffer of its own.
final class MQTTLinkHandler: ChannelDuplexHandler {
    typealias InboundIn = Packet
    typealias InboundOut = Frame
    typealias OutboundIn = Frame
    typealias OutboundOut = ByteBuffer

    /// What the buffer of encoded packets may hold before it is written without waiting for the flush.
    static let handOverBytes = 16 * 1024

    private var adapter: MQTTLinkAdapter
    private let memory: MQTTLinkMemory
    private let logger: Logger

    /// Packets encoded since the last hand-over.
    private var encoded: ByteBuffer?

    init(adapter: MQTTLinkAdapter, memory: MQTTLinkMemory, logger: Logger) {
        self.adapter = adapter
        self.memory = memory
        self.logger = logger
        memory.maxBody = nil
    }

    /// Packets written while reading, flushed once the read is done: a batch of PUBACKs frees
    /// places for as many held PUBLISHes, and they leave in one write, not one each.
    private var flushAfterRead = false

    /// A read the adapter's held messages put off (`read(context:)`).
    private var readHeld = false

    /// The ACKs of this read, the last one per session (ACK is cumulative), handed to the engine
    /// when the read is done or before any other frame: a burst of PUBACKs (one per message)
    /// reaches the sessions and the store as one acknowledgement per session.
    private var heldAcks: [Ack] = []

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let outputs = adapter.received(unwrapInboundIn(data))
        memory.maxBody = adapter.maxBody
        if let limits = adapter.limits, memory.granted?.limits != limits { granted(limits) }
        // What ends the link (a DISCONNECT with its reason first) leaves at once, before the engine closes.
        let now = outputs.contains(where: \.endsLink)
        if perform(outputs, context: context, flush: now, holdingAcks: true) && !now { flushAfterRead = true }
    }

    /// The decoder read past a PUBLISH above our Maximum Packet Size: the adapter refuses it.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard let head = event as? OversizedPublish else { return context.fireUserInboundEventTriggered(event) }
        let outputs = adapter.receivedOversized(head)
        let now = outputs.contains(where: \.endsLink)
        if perform(outputs, context: context, flush: now, holdingAcks: true) && !now { flushAfterRead = true }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        releaseAcks(context: context)
        if flushAfterRead {
            flushAfterRead = false
            flushEncoded(context: context)
        }
        context.fireChannelReadComplete()
    }

    func flush(context: ChannelHandlerContext) {
        flushEncoded(context: context)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        perform(adapter.send(unwrapOutboundIn(data)), context: context, flush: false)
        promise?.succeed()
        // An ACK or a WINDOW may have let held messages go.
        if readHeld, !adapter.holdsEnough {
            readHeld = false
            context.read()
        }
    }

    /// Reads from the broker only while the adapter holds fewer `down` messages than our Receive
    /// Maximum: a broker that sends more than it may is pushed back on by TCP, not kept in memory.
    func read(context: ChannelHandlerContext) {
        guard !adapter.holdsEnough else {
            readHeld = true
            return
        }
        context.read()
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        if mode == .all {
            perform(adapter.closing(), context: context, flush: true)
        }
        context.close(mode: mode, promise: promise)
    }

    func channelInactive(context: ChannelHandlerContext) {
        releaseAcks(context: context)
        memory.lastAcked = adapter.lastAcked
        memory.noSubscriberStreak = adapter.noSubscriberStreak
        context.fireChannelInactive()
    }

    /// Packets first (a SUBSCRIBE goes before the OPENs that LOGIN_OK sets off), then frames, in order.
    /// Whether it wrote a packet.
    @discardableResult
    private func perform(_ outputs: [MQTTLinkAdapter.Output], context: ChannelHandlerContext, flush: Bool,
                         holdingAcks: Bool = false) -> Bool {
        var wrote = false
        for output in outputs {
            if case .packet(let packet) = output {
                write(packet, context: context)
                wrote = true
            }
        }
        if wrote && flush { flushEncoded(context: context) }
        for output in outputs {
            switch output {
            case .packet:
                break
            case .frame(.ack(let ack)) where holdingAcks:
                hold(ack)
            case .frame(let frame):
                releaseAcks(context: context)
                context.fireChannelRead(wrapInboundOut(frame))
            case .fail(let reason):
                releaseAcks(context: context)
                context.fireErrorCaught(MQTTLinkFailure(description: reason))
            case .note(let text):
                logger.debug("mqtt: \(text)")
            case .warning(let kind, let details):
                OutsideLog.shared.log(kind, from: .broker, metadata: details.mapValues { .string($0) },
                                      to: logger, eventLoop: context.eventLoop)
            }
        }
        return wrote
    }

    /// A CONNACK that grants other limits than the last one: STATUS shows them, and what they
    /// cost is logged once, not at every reconnect.
    private func granted(_ limits: BrokerLimits) {
        let grant = MQTTBrokerGrant(limits, settings: adapter.settings)
        let known = Set(memory.granted?.warnings ?? [])
        memory.granted = grant
        for warning in grant.warnings where !known.contains(warning) { logger.warning("\(warning)") }
    }

    /// Keeps `ack` in place of an earlier one of its session (seqs only grow: PUBACKs come in
    /// the order of the PUBLISHes).
    private func hold(_ ack: Ack) {
        if let index = heldAcks.lastIndex(where: { $0.session == ack.session }) {
            heldAcks[index] = ack
        } else {
            heldAcks.append(ack)
        }
    }

    private func releaseAcks(context: ChannelHandlerContext) {
        guard !heldAcks.isEmpty else { return }
        var acks: [Ack] = []
        swap(&acks, &heldAcks)  // taken out first: firing may reach this handler again
        for ack in acks { context.fireChannelRead(wrapInboundOut(Frame.ack(ack))) }
        if heldAcks.isEmpty {
            acks.removeAll(keepingCapacity: true)
            heldAcks = acks
        }
    }

    private func write(_ packet: Packet, context: ChannelHandlerContext) {
        if encoded == nil { encoded = context.channel.allocator.buffer(capacity: Self.handOverBytes) }
        let payload: ByteBuffer?
        do {
            // The adapter sizes packets to the broker's Maximum Packet Size; this limit is MQTT's own.
            payload = try packet.encode(into: &encoded!, leavingPayloadFrom: Self.handOverBytes)
        } catch {
            // Nothing of the packet stays in the buffer (`encode` rewinds on failure).
            context.fireErrorCaught(MQTTLinkFailure(description: "cannot encode \(packet.type): \(error)"))
            return
        }
        if let payload {
            // A large payload follows its packet's head as the buffer it is: one more iovec, no copy.
            handOver(context: context)
            context.write(wrapOutboundOut(payload), promise: nil)
        } else if encoded!.readableBytes >= Self.handOverBytes {
            handOver(context: context)
        }
    }

    /// Gives the packets encoded so far to the pipeline, unflushed.
    private func handOver(context: ChannelHandlerContext) {
        guard let bytes = encoded else { return }
        encoded = nil
        context.write(wrapOutboundOut(bytes), promise: nil)
    }

    private func flushEncoded(context: ChannelHandlerContext) {
        handOver(context: context)
        context.flush()
    }
}
