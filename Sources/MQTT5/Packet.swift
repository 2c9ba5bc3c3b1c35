import NIOCore

/// One MQTT 5 Control Packet (§2.1), either direction.
///
/// Every packet starts with the fixed header:
///
/// ```
/// +-------------+-------------+--------------------------------+
/// | type:4      | flags:4     | Remaining Length (VBI, 1–4 B)  |
/// +-------------+-------------+--------------------------------+
/// ```
public enum Packet: Hashable, Sendable {
    case connect(Connect)
    case connack(ConnAck)
    case publish(Publish)
    case puback(PublishAck)
    case pubrec(PublishAck)
    case pubrel(PublishAck)
    case pubcomp(PublishAck)
    case subscribe(Subscribe)
    case suback(SubscriptionAck)
    case unsubscribe(Unsubscribe)
    case unsuback(SubscriptionAck)
    case pingreq
    case pingresp
    case disconnect(Disconnect)
    case auth(Auth)

    public var type: PacketType {
        switch self {
        case .connect: .connect
        case .connack: .connack
        case .publish: .publish
        case .puback: .puback
        case .pubrec: .pubrec
        case .pubrel: .pubrel
        case .pubcomp: .pubcomp
        case .subscribe: .subscribe
        case .suback: .suback
        case .unsubscribe: .unsubscribe
        case .unsuback: .unsuback
        case .pingreq: .pingreq
        case .pingresp: .pingresp
        case .disconnect: .disconnect
        case .auth: .auth
        }
    }

    /// The largest packet the standard can express: a 1-byte type, a 4-byte
    /// Remaining Length and 268,435,455 bytes after them.
    public static let largestSize = 1 + 4 + Int(VariableByteInteger.max)

    /// Appends the packet. Throws, writing nothing, if a field breaks a rule of
    /// the standard or the whole packet would exceed `maxPacketSize` (the
    /// peer's Maximum Packet Size, §3.1.2.11.4 and §3.2.2.3.6).
    public func encode(into buffer: inout ByteBuffer, maxPacketSize: Int = Packet.largestSize) throws(MQTT5Error) {
        _ = try encode(into: &buffer, maxPacketSize: maxPacketSize, leavingPayloadFrom: .max)  // no payload is that large: all written
    }

    /// Appends the packet, except a PUBLISH payload of `threshold` bytes or more, which it
    /// returns for the caller to write right after as a buffer of its own: a gathering write
    /// that does not copy a large payload. Throws, writing nothing, as `encode(into:maxPacketSize:)`.
    public func encode(into buffer: inout ByteBuffer, maxPacketSize: Int = Packet.largestSize,
                       leavingPayloadFrom threshold: Int) throws(MQTT5Error) -> ByteBuffer? {
        let start = buffer.writerIndex
        buffer.writeInteger(type.rawValue << 4 | flags)
        buffer.writeInteger(UInt32(0))  // room for the longest Remaining Length; moved down below
        let bodyStart = buffer.writerIndex
        let payload: ByteBuffer?
        do {
            payload = try writeBody(into: &buffer)
        } catch {
            buffer.moveWriterIndex(to: start)
            throw error
        }
        // The payload stays out of `buffer` until its length is known, so that only the bytes
        // before it move when the Remaining Length takes fewer than 4 bytes.
        let headLength = buffer.writerIndex - bodyStart
        let bodyLength = headLength + (payload?.readableBytes ?? 0)
        let lengthSize = VariableByteInteger.size(of: UInt32(clamping: bodyLength))
        let total = 1 + lengthSize + bodyLength
        guard bodyLength <= VariableByteInteger.max, total <= maxPacketSize else {
            buffer.moveWriterIndex(to: start)
            throw .packetTooLarge(size: total, limit: min(maxPacketSize, Packet.largestSize))
        }
        if lengthSize < 4 {
            try! buffer.copyBytes(at: bodyStart, to: start + 1 + lengthSize, length: headLength)
        }
        buffer.moveWriterIndex(to: start + 1)
        VariableByteInteger.write(UInt32(bodyLength), to: &buffer)
        buffer.moveWriterIndex(to: start + 1 + lengthSize + headLength)
        guard let payload, payload.readableBytes < threshold else { return payload }
        buffer.writeImmutableBuffer(payload)
        return nil
    }

    /// The packet as a new buffer.
    public func encoded(maxPacketSize: Int = Packet.largestSize, allocator: ByteBufferAllocator = ByteBufferAllocator()) throws(MQTT5Error) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: 64)
        try encode(into: &buffer, maxPacketSize: maxPacketSize)
        return buffer
    }

    private var flags: UInt8 {
        if case .publish(let publish) = self { return publish.flags }
        return type.requiredFlags ?? 0
    }

    /// Writes the body, except a PUBLISH's payload, which it returns.
    private func writeBody(into buffer: inout ByteBuffer) throws(MQTT5Error) -> ByteBuffer? {
        switch self {
        case .connect(let connect): try connect.writeBody(into: &buffer)
        case .connack(let connack): try connack.writeBody(into: &buffer)
        case .publish(let publish):
            try publish.writeHead(into: &buffer)
            return publish.payload
        case .puback(let ack): try ack.writeBody(into: &buffer, context: .puback)
        case .pubrec(let ack): try ack.writeBody(into: &buffer, context: .pubrec)
        case .pubrel(let ack): try ack.writeBody(into: &buffer, context: .pubrel)
        case .pubcomp(let ack): try ack.writeBody(into: &buffer, context: .pubcomp)
        case .subscribe(let subscribe): try subscribe.writeBody(into: &buffer)
        case .suback(let ack): try ack.writeBody(into: &buffer, context: .suback)
        case .unsubscribe(let unsubscribe): try unsubscribe.writeBody(into: &buffer)
        case .unsuback(let ack): try ack.writeBody(into: &buffer, context: .unsuback)
        case .pingreq, .pingresp: break
        case .disconnect(let disconnect): try disconnect.writeBody(into: &buffer, context: .disconnect)
        case .auth(let auth): try auth.writeBody(into: &buffer, context: .auth)
        }
        return nil
    }
}
