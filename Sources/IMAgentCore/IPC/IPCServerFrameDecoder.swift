import AgentIPC
import IMLink
import NIOCore

/// The daemon's frame decoder: `IPCFrameDecoder`'s rules, with a smaller
/// limit until the connection's HELLO is done. A connection that has not said
/// HELLO may make the daemon hold at most 64 KiB (a HELLO is a few hundred
/// bytes), not MAX_PAYLOAD + 64 KiB: otherwise any local process could open
/// connections and park a megabyte in each.
///
/// While the client does not read what it is sent (its channel is not writable), no further
/// frame is decoded and its socket is not read: a client that keeps asking without reading
/// gets no more answers, and costs no more memory or time, until it reads.
struct IPCServerFrameDecoder: NIOSingleStepByteToMessageDecoder {
    typealias InboundOut = IPCFrame

    /// The frame length limit before HELLO is `lengthLimit(maxPayload: 0)`, 64 KiB.
    static let maxPayloadBeforeHello: UInt32 = 0

    let maxPayload: UInt32
    let client: IPCClientConnection
    private var assembly = FrameAssembly()

    init(maxPayload: UInt32, client: IPCClientConnection) {
        self.maxPayload = maxPayload
        self.client = client
    }

    mutating func decode(buffer: inout ByteBuffer) throws -> IPCFrame? {
        let limit = client.greeted ? maxPayload : Self.maxPayloadBeforeHello
        switch try assembly.next(from: &buffer, frameSize: { header throws(IPCError) in
            try IPCFrameParser.frameSize(header, maxPayload: limit)
        }) {
        case .inPlace: return try IPCFrameParser.parse(&buffer, maxPayload: limit)
        case .gathered(var whole): return try IPCFrameParser.parse(&whole, maxPayload: limit)
        case .needMoreData: return nil
        }
    }

    /// At the end of the input, what is left is decoded only while the client still reads:
    /// a client that asked without reading and closed would otherwise have every request it
    /// left behind answered, into a socket nobody reads.
    mutating func decodeLast(buffer: inout ByteBuffer, seenEOF: Bool) throws -> IPCFrame? {
        guard client.isWritable else { return nil }
        return try decode(buffer: &buffer)
    }

    /// What `NIOSingleStepByteToMessageDecoder` does by default, here so it is specialized: the
    /// default is generic, and looked up the metadata of `Optional<IPCFrame>` for every frame.
    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard client.isWritable else {
            client.pauseReadingUntilWritable()
            return .needMoreData
        }
        guard let decoded = try decode(buffer: &buffer) else { return .needMoreData }
        context.fireChannelRead(Self.wrapInboundOut(decoded))
        return .continue
    }
}
