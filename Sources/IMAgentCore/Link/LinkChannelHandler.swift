import IMLink
import NIOCore
import NIOSSL
import NIOTLS

/// The inbound body limit of one connection: 1 MiB until HELLO_OK, then the
/// MAX_FRAME we announced (wire.md section 1). Shared by the connection's
/// decoder and the engine, on the loop only: the engine raises it while the
/// HELLO_OK is being delivered, before the decoder parses the next frame.
final class FrameLimit {
    var maxBody: UInt32 = FrameHeader.defaultMaxBody
}

/// `IMLinkFrameDecoder` with a limit that can be raised mid-stream.
struct NegotiatedFrameDecoder: NIOSingleStepByteToMessageDecoder {
    typealias InboundOut = Frame
    let limit: FrameLimit
    /// Kept across reads: it may hold part of a large frame.
    private var decoder = IMLinkFrameDecoder()

    init(limit: FrameLimit) {
        self.limit = limit
    }

    mutating func decode(buffer: inout ByteBuffer) throws -> Frame? {
        decoder.maxBody = min(limit.maxBody, FrameHeader.maxNegotiableBody)
        return try decoder.decode(buffer: &buffer)
    }

    mutating func decodeLast(buffer: inout ByteBuffer, seenEOF: Bool) throws -> Frame? {
        try decode(buffer: &buffer)
    }

    /// What `NIOSingleStepByteToMessageDecoder` does by default, here so it is specialized: the
    /// default is generic, and looked up the metadata of `Optional<Frame>` for every frame.
    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let decoded = try decode(buffer: &buffer) else { return .needMoreData }
        context.fireChannelRead(Self.wrapInboundOut(decoded))
        return .continue
    }
}

/// The last handler of a link connection. It only translates channel events
/// into engine events tagged with the attempt they belong to; the engine
/// (and through it the state machine) decides what they mean.
final class LinkChannelHandler: ChannelInboundHandler {
    typealias InboundIn = Frame

    let attempt: AttemptID
    private weak var engine: LinkEngineCore?

    init(attempt: AttemptID, engine: LinkEngineCore) {
        self.attempt = attempt
        self.engine = engine
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        engine?.received(unwrapInboundIn(data), on: attempt)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let tlsEvent = event as? TLSUserEvent, case .handshakeCompleted(let alpn) = tlsEvent {
            // The server certificate's expiry, for STATUS and `imagent doctor`.
            let notAfter = try? context.pipeline.syncOperations.handler(type: NIOSSLHandler.self).peerCertificate?.notValidAfter
            engine?.tlsHandshakeCompleted(on: attempt, negotiatedProtocol: alpn,
                                          certificateNotAfterUnixMS: notAfter.map { UInt64(clamping: $0) * 1000 })
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        engine?.channelFailed(attempt, error: error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        engine?.channelClosed(attempt)
        context.fireChannelInactive()
    }
}
