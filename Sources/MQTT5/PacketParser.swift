import NIOCore

/// Incremental packet parsing, independent of any channel: call `parse` with
/// the bytes received so far; it consumes one whole packet or nothing.
public enum PacketParser {
    /// Reads one packet from the front of `buffer`.
    ///
    /// Returns nil, leaving `buffer` untouched, while the packet is incomplete.
    /// The fixed header is checked — type, flags, and the whole size against
    /// `maxPacketSize` (what this side announced as Maximum Packet Size) — as
    /// soon as its bytes are there, so an oversized packet is refused before
    /// any of its body is buffered.
    public static func parse(_ buffer: inout ByteBuffer, maxPacketSize: Int = Packet.largestSize) throws(MQTT5Error) -> Packet? {
        let start = buffer.readerIndex
        guard let first = buffer.getInteger(at: start, as: UInt8.self) else { return nil }
        guard let type = PacketType(rawValue: first >> 4) else { throw .reservedPacketType }
        let flags = first & 0x0F
        if let required = type.requiredFlags, flags != required {
            throw .invalidFixedHeaderFlags(type, flags: flags)
        }
        guard let (remaining, lengthSize) = try VariableByteInteger.get(from: buffer, at: start + 1) else { return nil }
        let total = 1 + lengthSize + Int(remaining)
        guard total <= maxPacketSize else { throw .packetTooLarge(size: total, limit: maxPacketSize) }
        guard buffer.readableBytes >= total else { return nil }

        var reader = PacketReader(type: type, body: buffer.getSlice(at: start + 1 + lengthSize, length: Int(remaining))!)
        let packet = try body(type, flags: flags, reader: &reader)
        buffer.moveReaderIndex(forwardBy: total)
        return packet
    }

    private static func body(_ type: PacketType, flags: UInt8, reader: inout PacketReader) throws(MQTT5Error) -> Packet {
        switch type {
        case .connect: return .connect(try Connect(reading: &reader))
        case .connack: return .connack(try ConnAck(reading: &reader))
        case .publish: return .publish(try Publish(flags: flags, reading: &reader))
        case .puback: return .puback(try PublishAck(reading: &reader, context: .puback))
        case .pubrec: return .pubrec(try PublishAck(reading: &reader, context: .pubrec))
        case .pubrel: return .pubrel(try PublishAck(reading: &reader, context: .pubrel))
        case .pubcomp: return .pubcomp(try PublishAck(reading: &reader, context: .pubcomp))
        case .subscribe: return .subscribe(try Subscribe(reading: &reader))
        case .suback: return .suback(try SubscriptionAck(reading: &reader, context: .suback))
        case .unsubscribe: return .unsubscribe(try Unsubscribe(reading: &reader))
        case .unsuback: return .unsuback(try SubscriptionAck(reading: &reader, context: .unsuback))
        case .pingreq, .pingresp:
            try reader.finish()
            return type == .pingreq ? .pingreq : .pingresp
        case .disconnect: return .disconnect(try Disconnect(reading: &reader, context: .disconnect))
        case .auth: return .auth(try Auth(reading: &reader, context: .auth))
        }
    }
}
