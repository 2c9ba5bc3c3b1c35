import NIOCore

/// A PUBLISH larger than the Maximum Packet Size this side announced, read without its payload:
/// what identifies it (topic, QoS, Packet Identifier, properties; the payload left empty) and
/// the size the whole packet has on the wire.
///
/// The standard forbids a server to send one [MQTT-3.1.2-24] and has the client disconnect with
/// 0x95 when it does (§3.1.2.11.4). A broker that ignores the limit resends the same message on
/// every new connection, so a client that only disconnects never gets past it; reading past it
/// and refusing it in its PUBACK keeps the connection and ends the loop.
public struct OversizedPublish: Hashable, Sendable {
    public var publish: Publish
    public var size: Int

    public init(publish: Publish, size: Int) {
        self.publish = publish
        self.size = size
    }
}

extension PacketParser {
    /// The head of the oversized PUBLISH at the front of `buffer`, once its first `maxPacketSize`
    /// bytes are there (nil, `buffer` untouched, until then); those bytes are consumed and
    /// `skip` says how many more of the packet follow, to be read past without keeping them.
    /// Throws `packetTooLarge` when the packet is no PUBLISH, or its head alone does not fit in
    /// `maxPacketSize` bytes; any other error of a malformed head as `parse` would.
    public static func oversizedPublishHead(_ buffer: inout ByteBuffer, maxPacketSize: Int) throws(MQTT5Error)
        -> (head: OversizedPublish, skip: Int)?
    {
        let start = buffer.readerIndex
        guard let first = buffer.getInteger(at: start, as: UInt8.self),
              let (remaining, lengthSize) = try VariableByteInteger.get(from: buffer, at: start + 1) else { return nil }
        let total = 1 + lengthSize + Int(remaining)
        guard first >> 4 == PacketType.publish.rawValue, total > maxPacketSize, maxPacketSize > 1 + lengthSize else {
            throw .packetTooLarge(size: total, limit: maxPacketSize)
        }
        guard buffer.readableBytes >= maxPacketSize else { return nil }
        var reader = PacketReader(type: .publish, body: buffer.getSlice(at: start + 1 + lengthSize, length: maxPacketSize - 1 - lengthSize)!)
        var publish: Publish
        do {
            publish = try Publish(flags: first & 0x0F, reading: &reader)
        } catch {
            if case .truncated = error { throw .packetTooLarge(size: total, limit: maxPacketSize) }
            throw error
        }
        publish.payload = ByteBuffer()
        buffer.moveReaderIndex(forwardBy: maxPacketSize)
        return (OversizedPublish(publish: publish, size: total), total - maxPacketSize)
    }
}
