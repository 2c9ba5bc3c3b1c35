import NIOCore

/// PUBACK, PUBREC, PUBREL and PUBCOMP (§3.4–§3.7), which share one layout;
/// the packet type says which it is.
///
/// ```
/// +-----------+-----------+-------------------+-------------+------------+
/// | type:4 f:4| Rem. Len. | Packet Identifier | Reason Code | Properties |
/// +-----------+-----------+-------------------+-------------+------------+
///   f = 0010 for PUBREL, 0000 otherwise
///   Remaining Length 2: Reason Code 0x00 and no properties are implied;
///   Remaining Length 3: no Property Length, 0 is implied (§3.4.2.2).
/// ```
///
/// The encoder writes the shortest of these forms, as paho and mosquitto do,
/// so a longer form received (e.g. Success with an empty property list)
/// decodes to a value that re-encodes shorter.
public struct PublishAck: Hashable, Sendable {
    public var packetIdentifier: UInt16
    public var reasonCode: ReasonCode
    public var properties: Properties

    public init(packetIdentifier: UInt16, reasonCode: ReasonCode = .success, properties: Properties = []) {
        self.packetIdentifier = packetIdentifier
        self.reasonCode = reasonCode
        self.properties = properties
    }

    init(reading reader: inout PacketReader, context: PropertyContext) throws(MQTT5Error) {
        packetIdentifier = try reader.uint16("Packet Identifier")
        guard packetIdentifier != 0 else {
            throw .protocolViolation(reader.type, section: "2.2.1", rule: "Packet Identifier must be non-zero [MQTT-2.2.1-3]")
        }
        reasonCode = reader.remaining > 0 ? try ReasonCode.decode(try reader.byte("Reason Code"), in: reader.type) : .success
        properties = reader.remaining > 0 ? try Properties.read(from: &reader, in: context) : []
        try reader.finish()
    }

    func writeBody(into buffer: inout ByteBuffer, context: PropertyContext) throws(MQTT5Error) {
        guard packetIdentifier != 0 else {
            throw .protocolViolation(context.packetType, section: "2.2.1", rule: "Packet Identifier must be non-zero [MQTT-2.2.1-3]")
        }
        guard reasonCode.isAllowed(in: context.packetType) else {
            throw .invalidReasonCode(context.packetType, code: reasonCode.rawValue)
        }
        buffer.writeInteger(packetIdentifier)
        if properties.isEmpty {
            if reasonCode != .success { buffer.writeInteger(reasonCode.rawValue) }
        } else {
            buffer.writeInteger(reasonCode.rawValue)
            try properties.write(to: &buffer, in: context)
        }
    }
}
