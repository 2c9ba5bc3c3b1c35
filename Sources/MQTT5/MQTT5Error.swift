/// Why bytes were refused as an MQTT 5 packet, or a packet could not be encoded.
///
/// Every decoding error is fatal to the connection (MQTT 5.0 §4.13): the
/// client closes it, after a DISCONNECT carrying `reasonCode` where it can.
public enum MQTT5Error: Error, Hashable, Sendable, CustomStringConvertible {
    /// Packet type 0 is reserved (§2.1.2).
    case reservedPacketType
    /// The fixed header's low nibble is not what §2.1.3 prescribes for the type.
    case invalidFixedHeaderFlags(PacketType, flags: UInt8)
    /// A Variable Byte Integer longer than 4 bytes, or not in its shortest form (§1.5.5).
    case malformedVariableByteInteger
    /// The whole packet is larger than the Maximum Packet Size; refused from the fixed header alone (§3.1.2.11.4).
    case packetTooLarge(size: Int, limit: Int)
    /// The Remaining Length ends before `field` is complete.
    case truncated(PacketType, field: String)
    /// Bytes are left over after the last field the packet defines.
    case trailingBytes(PacketType, count: Int)
    /// A UTF-8 Encoded String that is ill-formed, holds U+0000, or is too long to encode (§1.5.4).
    case invalidString(field: String, reason: String)
    /// Binary Data longer than 65,535 bytes, which cannot be encoded (§1.5.6).
    case binaryTooLong(field: String, length: Int)
    /// A property identifier the standard does not define, or not allowed in this packet (§2.2.2.2).
    case propertyNotAllowed(identifier: UInt32, in: PropertyContext)
    /// A property that may appear once appeared again (§2.2.2.2 and each property's text).
    case duplicateProperty(PropertyIdentifier)
    /// A property whose value the standard forbids, e.g. Receive Maximum 0.
    case invalidPropertyValue(PropertyIdentifier, value: UInt32)
    /// A Reason Code the packet type does not define (§2.4).
    case invalidReasonCode(PacketType, code: UInt8)
    /// A rule of the standard that no other case names; `section` cites it.
    case protocolViolation(PacketType, section: String, rule: String)

    /// The Reason Code a DISCONNECT sent because of this error carries.
    public var reasonCode: ReasonCode {
        switch self {
        case .packetTooLarge: .packetTooLarge
        case .duplicateProperty, .invalidPropertyValue, .protocolViolation: .protocolError
        case .reservedPacketType, .invalidFixedHeaderFlags, .malformedVariableByteInteger, .truncated, .trailingBytes,
             .invalidString, .binaryTooLong, .propertyNotAllowed, .invalidReasonCode:
            .malformedPacket
        }
    }

    public var description: String {
        switch self {
        case .reservedPacketType:
            "packet type 0 is reserved: not an MQTT 5 peer, or the stream is out of step"
        case .invalidFixedHeaderFlags(let type, let flags):
            "\(type) with fixed-header flags 0x\(String(flags, radix: 16)) (§2.1.3)"
        case .malformedVariableByteInteger:
            "variable byte integer longer than 4 bytes or not in its shortest form (§1.5.5)"
        case .packetTooLarge(let size, let limit):
            "packet of \(size) bytes is above the maximum packet size of \(limit) bytes"
        case .truncated(let type, let field):
            "\(type) ends inside \(field)"
        case .trailingBytes(let type, let count):
            "\(type) has \(count) bytes after its last field"
        case .invalidString(let field, let reason):
            "\(field): \(reason) (§1.5.4)"
        case .binaryTooLong(let field, let length):
            "\(field) is \(length) bytes; binary data holds at most 65535 (§1.5.6)"
        case .propertyNotAllowed(let identifier, let context):
            if let known = PropertyIdentifier(rawValue: UInt8(truncatingIfNeeded: identifier)), identifier < 0x80 {
                "property \(known) is not allowed in \(context) (§2.2.2.2)"
            } else {
                "unknown property identifier 0x\(String(identifier, radix: 16)) in \(context) (§2.2.2.2)"
            }
        case .duplicateProperty(let identifier):
            "property \(identifier) appears more than once"
        case .invalidPropertyValue(let identifier, let value):
            "property \(identifier) has the forbidden value \(value)"
        case .invalidReasonCode(let type, let code):
            "reason code 0x\(String(code, radix: 16)) is not defined for \(type) (§2.4)"
        case .protocolViolation(let type, let section, let rule):
            "\(type): \(rule) (§\(section))"
        }
    }
}
