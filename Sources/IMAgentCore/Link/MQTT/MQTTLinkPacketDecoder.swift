import IMLink
import MQTT5
import NIOCore

/// The MQTT link's packet decoder: `MQTT5PacketDecoder`, reading past an oversized PUBLISH,
/// with a large packet that arrives over several reads gathered into a buffer of its own
/// (`FrameAssembly` says why).
struct MQTTLinkPacketDecoder: NIOSingleStepByteToMessageDecoder {
    typealias InboundOut = Packet

    private var packets: MQTT5PacketDecoder
    private var assembly = FrameAssembly()
    /// Bytes of an oversized packet that the packet decoder has still to read (its head) or
    /// read past; none of them is a header.
    private var oversizedLeft = 0

    init(maxPacketSize: Int) {
        packets = MQTT5PacketDecoder(maxPacketSize: maxPacketSize, readsPastOversizedPublish: true)
    }

    mutating func decode(buffer: inout ByteBuffer) throws -> Packet? {
        try packets.decode(buffer: &buffer)
    }

    mutating func decodeLast(buffer: inout ByteBuffer, seenEOF: Bool) throws -> Packet? {
        try packets.decodeLast(buffer: &buffer, seenEOF: seenEOF)
    }

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        if oversizedLeft > 0 { return try readOversized(context: context, buffer: &buffer) }
        let maxPacketSize = packets.maxPacketSize
        var oversized = 0
        let next = try assembly.next(from: &buffer) { header throws(MQTT5Error) -> Int? in
            guard let (remaining, lengthSize) = try VariableByteInteger.get(from: header, at: header.readerIndex + 1) else {
                return nil
            }
            let size = 1 + lengthSize + Int(remaining)
            guard size <= maxPacketSize else {
                oversized = size
                return nil
            }
            if size > header.readableBytes {
                // The fixed header's checks, before anything is gathered: a bad one is refused now.
                var probe = header
                _ = try PacketParser.parse(&probe, maxPacketSize: maxPacketSize)
            }
            return size
        }
        switch next {
        case .needMoreData:
            return .needMoreData
        case .gathered(var whole):
            return try packets.decode(context: context, buffer: &whole)
        case .inPlace where oversized > 0:
            oversizedLeft = oversized
            return try readOversized(context: context, buffer: &buffer)
        case .inPlace:
            return try packets.decode(context: context, buffer: &buffer)
        }
    }

    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        try decode(context: context, buffer: &buffer)
    }

    /// The packet decoder reads the oversized packet's head and then past the rest.
    private mutating func readOversized(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        let before = buffer.readableBytes
        let state = try packets.decode(context: context, buffer: &buffer)
        oversizedLeft -= before - buffer.readableBytes
        return state
    }
}
