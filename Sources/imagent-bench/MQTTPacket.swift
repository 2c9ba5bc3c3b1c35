import NIOCore

/// The few MQTT 3.1.1 packets the mosquitto comparison needs (OASIS MQTT
/// 3.1.1, section 3): enough to connect, subscribe and exchange QoS 1
/// PUBLISH/PUBACK pairs. Not a general client: no QoS 2, no will, no auth.
enum MQTTPacket: Sendable, Equatable {
    case connect(clientID: String)
    case connack(returnCode: UInt8)
    /// QoS 1 always: the comparison is about acknowledged delivery.
    case publish(topic: String, packetID: UInt16, payload: ByteBuffer)
    case puback(packetID: UInt16)
    case subscribe(packetID: UInt16, filter: String)
    case suback(packetID: UInt16, grantedQoS: UInt8)
    /// A packet this client never sends and ignores when received (PINGRESP, …).
    case other(type: UInt8)

    fileprivate enum PacketType: UInt8 {
        case connect = 1, connack = 2, publish = 3, puback = 4, subscribe = 8, suback = 9
    }
}

struct MQTTProtocolError: Error, CustomStringConvertible {
    var description: String
}

/// Frames MQTT packets: a type byte, a variable-length "remaining length"
/// (1–4 bytes, 7 bits each), then the body. Refuses bodies over `maxBody`
/// before buffering them.
struct MQTTPacketDecoder: ByteToMessageDecoder {
    typealias InboundOut = MQTTPacket
    let maxBody: Int

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        var peek = buffer
        guard let first = peek.readInteger(as: UInt8.self) else { return .needMoreData }
        var length = 0
        var shift = 0
        while true {
            guard let byte = peek.readInteger(as: UInt8.self) else { return .needMoreData }
            length |= Int(byte & 0x7F) << shift
            if byte & 0x80 == 0 { break }
            shift += 7
            guard shift < 28 else { throw MQTTProtocolError(description: "remaining length longer than 4 bytes") }
        }
        guard length <= maxBody else { throw MQTTProtocolError(description: "packet of \(length) bytes over the limit") }
        guard var body = peek.readSlice(length: length) else { return .needMoreData }
        buffer.moveReaderIndex(to: peek.readerIndex)
        context.fireChannelRead(wrapInboundOut(try Self.packet(type: first >> 4, flags: first & 0x0F, body: &body)))
        return .continue
    }

    private static func packet(type: UInt8, flags: UInt8, body: inout ByteBuffer) throws -> MQTTPacket {
        switch MQTTPacket.PacketType(rawValue: type) {
        case .connack:
            guard let bytes = body.readBytes(length: 2) else { throw MQTTProtocolError(description: "short CONNACK") }
            return .connack(returnCode: bytes[1])
        case .publish:
            guard let topicLength = body.readInteger(as: UInt16.self),
                  let topic = body.readString(length: Int(topicLength)) else {
                throw MQTTProtocolError(description: "short PUBLISH")
            }
            let qos = (flags >> 1) & 0x03
            let packetID = qos > 0 ? body.readInteger(as: UInt16.self) : 0
            guard let packetID else { throw MQTTProtocolError(description: "PUBLISH without its packet id") }
            return .publish(topic: topic, packetID: packetID, payload: body)
        case .puback:
            guard let packetID = body.readInteger(as: UInt16.self) else { throw MQTTProtocolError(description: "short PUBACK") }
            return .puback(packetID: packetID)
        case .suback:
            guard let packetID = body.readInteger(as: UInt16.self), let granted = body.readInteger(as: UInt8.self) else {
                throw MQTTProtocolError(description: "short SUBACK")
            }
            return .suback(packetID: packetID, grantedQoS: granted)
        case .connect, .subscribe, nil:
            return .other(type: type)
        }
    }
}

struct MQTTPacketEncoder: MessageToByteEncoder {
    typealias OutboundIn = MQTTPacket

    func encode(data packet: MQTTPacket, out: inout ByteBuffer) throws {
        var body = ByteBuffer()
        let first: UInt8
        switch packet {
        case .connect(let clientID):
            first = MQTTPacket.PacketType.connect.rawValue << 4
            body.writeMQTTString("MQTT")
            body.writeInteger(UInt8(4))        // protocol level 4 = 3.1.1
            body.writeInteger(UInt8(0x02))     // clean session
            body.writeInteger(UInt16(0))       // keep-alive off: runs are short
            body.writeMQTTString(clientID)
        case .publish(let topic, let packetID, var payload):
            first = MQTTPacket.PacketType.publish.rawValue << 4 | 0x02  // QoS 1
            body.writeMQTTString(topic)
            body.writeInteger(packetID)
            body.writeBuffer(&payload)
        case .puback(let packetID):
            first = MQTTPacket.PacketType.puback.rawValue << 4
            body.writeInteger(packetID)
        case .subscribe(let packetID, let filter):
            first = MQTTPacket.PacketType.subscribe.rawValue << 4 | 0x02  // reserved bits 0010
            body.writeInteger(packetID)
            body.writeMQTTString(filter)
            body.writeInteger(UInt8(1))        // QoS 1
        case .connack, .suback, .other:
            throw MQTTProtocolError(description: "this client never sends \(packet)")
        }
        out.writeInteger(first)
        var length = body.readableBytes
        repeat {
            var byte = UInt8(length & 0x7F)
            length >>= 7
            if length > 0 { byte |= 0x80 }
            out.writeInteger(byte)
        } while length > 0
        out.writeBuffer(&body)
    }
}

private extension ByteBuffer {
    mutating func writeMQTTString(_ text: String) {
        writeInteger(UInt16(text.utf8.count))
        writeString(text)
    }
}
