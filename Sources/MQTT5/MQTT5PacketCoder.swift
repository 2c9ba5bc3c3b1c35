import NIOCore

/// Turns inbound bytes into `Packet`s on a channel, one per call.
///
/// `maxPacketSize` is the Maximum Packet Size this side announced in CONNECT;
/// a larger packet is refused from its fixed header (§3.1.2.11.4). With
/// `readsPastOversizedPublish`, a larger PUBLISH is not refused: its head goes up the
/// pipeline as a user inbound event (`OversizedPublish`) and the rest of it is read
/// past as it arrives, never held (`OversizedPublish` says why).
public struct MQTT5PacketDecoder: NIOSingleStepByteToMessageDecoder {
    public typealias InboundOut = Packet

    public var maxPacketSize: Int
    public var readsPastOversizedPublish: Bool
    /// Bytes of an oversized PUBLISH still to read past.
    private var skipping = 0

    public init(maxPacketSize: Int = Packet.largestSize, readsPastOversizedPublish: Bool = false) {
        self.maxPacketSize = maxPacketSize
        self.readsPastOversizedPublish = readsPastOversizedPublish
    }

    public mutating func decode(buffer: inout ByteBuffer) throws -> Packet? {
        try PacketParser.parse(&buffer, maxPacketSize: maxPacketSize)
    }

    public mutating func decodeLast(buffer: inout ByteBuffer, seenEOF: Bool) throws -> Packet? {
        try decode(buffer: &buffer)
    }

    /// What `NIOSingleStepByteToMessageDecoder` does by default, here so it is specialized: the
    /// default is generic, and looked up the metadata of `Optional<Packet>` for every frame.
    public mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        if skipping > 0 {
            let count = min(skipping, buffer.readableBytes)
            buffer.moveReaderIndex(forwardBy: count)
            skipping -= count
            return skipping == 0 ? .continue : .needMoreData
        }
        let decoded: Packet?
        do {
            decoded = try PacketParser.parse(&buffer, maxPacketSize: maxPacketSize)
        } catch {
            guard case .packetTooLarge = error, readsPastOversizedPublish else { throw error }
            guard let (head, skip) = try PacketParser.oversizedPublishHead(&buffer, maxPacketSize: maxPacketSize) else {
                return .needMoreData
            }
            skipping = skip
            context.fireUserInboundEventTriggered(head)
            return .continue
        }
        guard let decoded else { return .needMoreData }
        context.fireChannelRead(Self.wrapInboundOut(decoded))
        return .continue
    }
}

/// Writes outbound `Packet`s to a channel, refusing one above the broker's
/// Maximum Packet Size (from CONNACK) rather than sending it.
public struct MQTT5PacketEncoder: MessageToByteEncoder {
    public typealias OutboundIn = Packet

    public var maxPacketSize: Int

    public init(maxPacketSize: Int = Packet.largestSize) {
        self.maxPacketSize = maxPacketSize
    }

    public func encode(data: Packet, out: inout ByteBuffer) throws {
        try data.encode(into: &out, maxPacketSize: maxPacketSize)
    }
}
