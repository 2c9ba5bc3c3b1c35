import NIOCore

/// SUBACK (§3.9) and UNSUBACK (§3.11), which share one layout; the packet
/// type says which it is and which Reason Codes are allowed.
///
/// ```
/// +-----------+-----------+-------------------+------------+-------------+--
/// | 0x90/0xB0 | Rem. Len. | Packet Identifier | Properties | Reason Code | … (one per Topic Filter)
/// +-----------+-----------+-------------------+------------+-------------+--
/// ```
///
/// An empty list of Reason Codes is refused: the request it answers had at
/// least one Topic Filter (a decision; §3.9.3 only says "one per filter").
public struct SubscriptionAck: Hashable, Sendable {
    public var packetIdentifier: UInt16
    public var properties: Properties
    public var reasonCodes: [ReasonCode]

    public init(packetIdentifier: UInt16, properties: Properties = [], reasonCodes: [ReasonCode]) {
        self.packetIdentifier = packetIdentifier
        self.properties = properties
        self.reasonCodes = reasonCodes
    }

    init(reading reader: inout PacketReader, context: PropertyContext) throws(MQTT5Error) {
        packetIdentifier = try reader.uint16("Packet Identifier")
        properties = try Properties.read(from: &reader, in: context)
        reasonCodes = []
        while reader.remaining > 0 {
            reasonCodes.append(try ReasonCode.decode(try reader.byte("Reason Code"), in: reader.type))
        }
        try check(context.packetType)
    }

    func writeBody(into buffer: inout ByteBuffer, context: PropertyContext) throws(MQTT5Error) {
        try check(context.packetType)
        for code in reasonCodes where !code.isAllowed(in: context.packetType) {
            throw .invalidReasonCode(context.packetType, code: code.rawValue)
        }
        buffer.writeInteger(packetIdentifier)
        try properties.write(to: &buffer, in: context)
        for code in reasonCodes { buffer.writeInteger(code.rawValue) }
    }

    private func check(_ type: PacketType) throws(MQTT5Error) {
        guard packetIdentifier != 0 else {
            throw .protocolViolation(type, section: "2.2.1", rule: "Packet Identifier must be non-zero [MQTT-2.2.1-3]")
        }
        guard !reasonCodes.isEmpty else {
            throw .protocolViolation(type, section: type == .suback ? "3.9.3" : "3.11.3", rule: "at least one Reason Code is required")
        }
    }
}
