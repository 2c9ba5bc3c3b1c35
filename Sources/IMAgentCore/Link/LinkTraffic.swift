import IMLink
import NIOCore

/// IMLink frames and bytes that crossed the link each way since the daemon
/// started, over every connection (bytes as IMLink writes them, inside TLS).
/// Counted by two small handlers in each connection's pipeline, and read,
/// on the engine's loop only (hence `@unchecked Sendable`).
final class LinkTraffic: @unchecked Sendable {
    struct Counts: Hashable, Sendable {
        var framesIn = 0
        var framesOut = 0
        var bytesIn = 0
        var bytesOut = 0
    }

    var counts = Counts()
}

/// Counts bytes, next to the socket (or to TLS, which it sits behind).
final class LinkByteCounter: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let traffic: LinkTraffic

    init(_ traffic: LinkTraffic) { self.traffic = traffic }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        traffic.counts.bytesIn += unwrapInboundIn(data).readableBytes
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        traffic.counts.bytesOut += unwrapOutboundIn(data).readableBytes
        context.write(data, promise: promise)
    }
}

/// Counts frames, between the codec and the engine's handler.
final class LinkFrameCounter: ChannelDuplexHandler {
    typealias InboundIn = Frame
    typealias InboundOut = Frame
    typealias OutboundIn = Frame
    typealias OutboundOut = Frame

    private let traffic: LinkTraffic

    init(_ traffic: LinkTraffic) { self.traffic = traffic }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        traffic.counts.framesIn += 1
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        traffic.counts.framesOut += 1
        context.write(data, promise: promise)
    }
}
