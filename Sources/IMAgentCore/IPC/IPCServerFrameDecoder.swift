import AgentIPC
import NIOCore

/// The daemon's frame decoder: `IPCFrameDecoder`'s rules, with a smaller
/// limit until the connection's HELLO is done. A connection that has not said
/// HELLO may make the daemon hold at most 64 KiB (a HELLO is a few hundred
/// bytes), not MAX_PAYLOAD + 64 KiB: otherwise any local process could open
/// connections and park a megabyte in each.
struct IPCServerFrameDecoder: NIOSingleStepByteToMessageDecoder {
    typealias InboundOut = IPCFrame

    /// The frame length limit before HELLO is `lengthLimit(maxPayload: 0)`, 64 KiB.
    static let maxPayloadBeforeHello: UInt32 = 0

    let maxPayload: UInt32
    let client: IPCClientConnection

    mutating func decode(buffer: inout ByteBuffer) throws -> IPCFrame? {
        try IPCFrameParser.parse(&buffer, maxPayload: client.greeted ? maxPayload : Self.maxPayloadBeforeHello)
    }

    mutating func decodeLast(buffer: inout ByteBuffer, seenEOF: Bool) throws -> IPCFrame? {
        try decode(buffer: &buffer)
    }

    /// What `NIOSingleStepByteToMessageDecoder` does by default, here so it is specialized: the
    /// default is generic, and looked up the metadata of `Optional<IPCFrame>` for every frame.
    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let decoded = try decode(buffer: &buffer) else { return .needMoreData }
        context.fireChannelRead(Self.wrapInboundOut(decoded))
        return .continue
    }
}
