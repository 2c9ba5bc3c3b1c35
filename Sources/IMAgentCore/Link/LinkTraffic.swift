import IMLink
import NIOCore

/// IMLink frames and bytes that crossed the link each way since the daemon
/// started, over every connection (bytes as IMLink writes them, inside TLS).
/// Counted by two small handlers in each connection's pipeline, and read,
/// on the engine's loop only (hence `@unchecked Sendable`). The engine's
/// cores also note here, for the metrics, reconnects by cause and RTT samples.
final class LinkTraffic: @unchecked Sendable {
    struct Counts: Hashable, Sendable {
        var framesIn = 0
        var framesOut = 0
        var bytesIn = 0
        var bytesOut = 0
        /// Links established after a lost one, by what ended the one before.
        var reconnects: [ReconnectCause: Int] = [:]
    }

    var counts = Counts()
    /// What ended the last established link, until the next one is established.
    private var lostTo: ReconnectCause?
    /// Hears every RTT sample (HELLO→HELLO_OK, PING→PONG).
    var rttSampled: ((Duration) -> Void)?

    /// An established link ended; `failure` is the reconnect policy's class of it, nil when it was no failure.
    func linkLost(_ failure: ReconnectPolicy.FailureClass?) {
        lostTo = ReconnectCause(failure)
    }

    func linkEstablished() {
        guard let cause = lostTo else { return }
        counts.reconnects[cause, default: 0] += 1
        lostTo = nil
    }
}

/// Why the link before a reconnect ended: the reconnect policy's failure
/// classes, and `other` for an end that was no failure (a user's reconnect or
/// disconnect, a reload, a network change, an expired token). The label values
/// of `imagentd_link_reconnects_by_cause_total`, listed in imagentd(8).
enum ReconnectCause: String, Hashable, Sendable, CaseIterable {
    case pathSilent = "path_silent"
    case serverRefusing = "server_refusing"
    case serverOverloaded = "server_overloaded"
    case other

    init(_ failure: ReconnectPolicy.FailureClass?) {
        switch failure {
        case .pathSilent: self = .pathSilent
        case .serverRefusing: self = .serverRefusing
        case .serverOverloaded: self = .serverOverloaded
        case nil: self = .other
        }
    }
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

/// Counts frames in, between the codec and the engine's handler (the engine counts those it
/// writes: IMLink frames leave it already encoded).
final class LinkFrameCounter: ChannelInboundHandler {
    typealias InboundIn = Frame
    typealias InboundOut = Frame

    private let traffic: LinkTraffic

    init(_ traffic: LinkTraffic) { self.traffic = traffic }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        traffic.counts.framesIn += 1
        context.fireChannelRead(data)
    }
}
