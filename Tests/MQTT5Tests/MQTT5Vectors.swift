import Foundation
import MQTT5
import NIOCore

/// The byte-exact vectors in `vectors/mqtt5.json`, written from the text of
/// MQTT 5.0 and read at test time.
struct MQTT5Vectors {
    struct Valid: Sendable {
        var name: String
        var bytes: [UInt8]
        var canonical: [UInt8]
        var maxPacketSize: Int
        /// Field name → value as text; lists joined by ", "; empty property lists and payloads left out.
        var decoded: [String: String]
    }

    struct Invalid: Sendable {
        var name: String
        var bytes: [UInt8]
        var maxPacketSize: Int
        var error: String
    }

    var valid: [Valid]
    var invalid: [Invalid]

    static let shared: MQTT5Vectors = {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("vectors/mqtt5.json")
        guard let data = try? Data(contentsOf: file),
              let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { fatalError("cannot read \(file.path)") }
        return MQTT5Vectors(json: json)
    }()

    private init(json: [String: Any]) {
        valid = (json["valid"] as! [[String: Any]]).map { entry in
            let bytes = hexBytes(entry["hex"] as! String)
            let decoded = (entry["decoded"] as! [String: Any]).mapValues { value in
                (value as? String) ?? (value as! [String]).joined(separator: ", ")
            }
            return Valid(
                name: entry["name"] as! String, bytes: bytes,
                canonical: (entry["canonical_hex"] as? String).map(hexBytes) ?? bytes,
                maxPacketSize: (entry["max_packet_size"] as? Int) ?? Packet.largestSize,
                decoded: decoded)
        }
        invalid = (json["invalid"] as! [[String: Any]]).map { entry in
            Invalid(
                name: entry["name"] as! String, bytes: hexBytes(entry["hex"] as! String),
                maxPacketSize: (entry["max_packet_size"] as? Int) ?? Packet.largestSize,
                error: entry["error"] as! String)
        }
    }
}

/// Hex digits to bytes; spaces (which group fields in the vectors) are skipped.
func hexBytes(_ hex: String) -> [UInt8] {
    let digits = Array(hex.filter { !$0.isWhitespace })
    return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(digits[$0...$0 + 1]), radix: 16)! }
}

func hexString(_ bytes: some Sequence<UInt8>) -> String {
    bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
}

/// A packet in the vectors' words, so a decoded value can be compared with the JSON.
func vectorFields(of packet: Packet) -> [String: String] {
    var fields = ["type": packet.type.description]
    func code(_ code: ReasonCode) -> String { "0x" + hexString([code.rawValue]) }
    switch packet {
    case .connect(let connect):
        fields["client_identifier"] = connect.clientIdentifier
        fields["clean_start"] = "\(connect.cleanStart)"
        fields["keep_alive"] = "\(connect.keepAlive)"
        fields["properties"] = text(connect.properties)
        if let will = connect.will {
            fields["will_topic"] = will.topic
            fields["will_payload"] = "0x" + hexString(will.payload.readableBytesView)
            fields["will_qos"] = "\(will.qos.rawValue)"
            fields["will_retain"] = "\(will.retain)"
            fields["will_properties"] = text(will.properties)
        }
        fields["user_name"] = connect.userName
        fields["password"] = connect.password.map { "0x" + hexString($0.readableBytesView) }
    case .connack(let connack):
        fields["session_present"] = "\(connack.sessionPresent)"
        fields["reason_code"] = code(connack.reasonCode)
        fields["properties"] = text(connack.properties)
    case .publish(let publish):
        fields["topic"] = publish.topic
        fields["qos"] = "\(publish.qos.rawValue)"
        fields["packet_identifier"] = "\(publish.packetIdentifier)"
        fields["dup"] = "\(publish.dup)"
        fields["retain"] = "\(publish.retain)"
        fields["properties"] = text(publish.properties)
        fields["payload"] = publish.payload.readableBytes == 0 ? nil : "0x" + hexString(publish.payload.readableBytesView)
    case .puback(let ack), .pubrec(let ack), .pubrel(let ack), .pubcomp(let ack):
        fields["packet_identifier"] = "\(ack.packetIdentifier)"
        fields["reason_code"] = code(ack.reasonCode)
        fields["properties"] = text(ack.properties)
    case .subscribe(let subscribe):
        fields["packet_identifier"] = "\(subscribe.packetIdentifier)"
        fields["properties"] = text(subscribe.properties)
        fields["subscriptions"] = subscribe.subscriptions.map { subscription in
            "\(subscription.topicFilter) qos=\(subscription.maximumQoS.rawValue) noLocal=\(subscription.noLocal ? 1 : 0) "
                + "retainAsPublished=\(subscription.retainAsPublished ? 1 : 0) retainHandling=\(subscription.retainHandling)"
        }.joined(separator: ", ")
    case .suback(let ack), .unsuback(let ack):
        fields["packet_identifier"] = "\(ack.packetIdentifier)"
        fields["properties"] = text(ack.properties)
        fields["reason_codes"] = ack.reasonCodes.map(code).joined(separator: ", ")
    case .unsubscribe(let unsubscribe):
        fields["packet_identifier"] = "\(unsubscribe.packetIdentifier)"
        fields["properties"] = text(unsubscribe.properties)
        fields["topic_filters"] = unsubscribe.topicFilters.joined(separator: ", ")
    case .pingreq, .pingresp:
        break
    case .disconnect(let disconnect), .auth(let disconnect):
        fields["reason_code"] = code(disconnect.reasonCode)
        fields["properties"] = text(disconnect.properties)
    }
    return fields
}

private func text(_ properties: Properties) -> String? {
    properties.isEmpty ? nil : properties.entries.map { property in
        let value = switch property.value {
        case .byte(let value): "\(value)"
        case .twoByteInteger(let value): "\(value)"
        case .fourByteInteger(let value), .variableByteInteger(let value): "\(value)"
        case .string(let string): string
        case .binary(let bytes): "0x" + hexString(bytes.readableBytesView)
        case .stringPair(let name, let value): "\(name):\(value)"
        }
        return "\(property.identifier)=\(value)"
    }.joined(separator: ", ")
}

/// An error in the vectors' words: its case, with the section or property where the vectors name one.
func vectorName(of error: MQTT5Error) -> String {
    switch error {
    case .reservedPacketType: "reservedPacketType"
    case .invalidFixedHeaderFlags: "invalidFixedHeaderFlags"
    case .malformedVariableByteInteger: "malformedVariableByteInteger"
    case .packetTooLarge: "packetTooLarge"
    case .truncated: "truncated"
    case .trailingBytes: "trailingBytes"
    case .invalidString: "invalidString"
    case .binaryTooLong: "binaryTooLong"
    case .propertyNotAllowed: "propertyNotAllowed"
    case .duplicateProperty(let identifier): "duplicateProperty(\(identifier))"
    case .invalidPropertyValue(let identifier, _): "invalidPropertyValue(\(identifier))"
    case .invalidReasonCode: "invalidReasonCode"
    case .protocolViolation(_, let section, _): "protocolViolation(\(section))"
    }
}
