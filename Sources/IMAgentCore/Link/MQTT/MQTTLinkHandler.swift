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
}

/// Why the adapter closes a connection (reported to the engine as the channel's error).
struct MQTTLinkFailure: Error, CustomStringConvertible {
    var description: String
}

/// The channel's side of `MQTTLinkAdapter`: below it MQTT packets, above it
/// the IMLink frames the engine reads and writes. It performs the adapter's
/// outputs and decides nothing.
final class MQTTLinkHandler: ChannelDuplexHandler {
    typealias InboundIn = Packet
    typealias InboundOut = Frame
    typealias OutboundIn = Frame
    typealias OutboundOut = Packet

    private var adapter: MQTTLinkAdapter
    private let memory: MQTTLinkMemory
    private let logger: Logger

    init(adapter: MQTTLinkAdapter, memory: MQTTLinkMemory, logger: Logger) {
        self.adapter = adapter
        self.memory = memory
        self.logger = logger
        memory.maxBody = nil
    }

    /// Packets written while reading, flushed once the read is done: a batch of PUBACKs frees
    /// places for as many held PUBLISHes, and they leave in one write, not one each.
    private var flushAfterRead = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let outputs = adapter.received(unwrapInboundIn(data))
        memory.maxBody = adapter.maxBody
        // What ends the link (a DISCONNECT with its reason first) leaves at once, before the engine closes.
        let now = outputs.contains(where: \.endsLink)
        if perform(outputs, context: context, flush: now) && !now { flushAfterRead = true }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if flushAfterRead {
            flushAfterRead = false
            context.flush()
        }
        context.fireChannelReadComplete()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        perform(adapter.send(unwrapOutboundIn(data)), context: context, flush: false)
        promise?.succeed()
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        if mode == .all {
            perform(adapter.closing(), context: context, flush: true)
        }
        context.close(mode: mode, promise: promise)
    }

    func channelInactive(context: ChannelHandlerContext) {
        memory.lastAcked = adapter.lastAcked
        memory.noSubscriberStreak = adapter.noSubscriberStreak
        context.fireChannelInactive()
    }

    /// Packets first (a SUBSCRIBE goes before the OPENs that LOGIN_OK sets off), then frames, in order.
    /// Whether it wrote a packet.
    @discardableResult
    private func perform(_ outputs: [MQTTLinkAdapter.Output], context: ChannelHandlerContext, flush: Bool) -> Bool {
        var wrote = false
        for output in outputs {
            if case .packet(let packet) = output {
                context.write(wrapOutboundOut(packet), promise: nil)
                wrote = true
            }
        }
        if wrote && flush { context.flush() }
        for output in outputs {
            switch output {
            case .packet:
                break
            case .frame(let frame):
                context.fireChannelRead(wrapInboundOut(frame))
            case .fail(let reason):
                context.fireErrorCaught(MQTTLinkFailure(description: reason))
            case .note(let text):
                logger.debug("mqtt: \(text)")
            case .warning(let text):
                logger.warning("mqtt: \(text)")
            }
        }
        return wrote
    }
}
