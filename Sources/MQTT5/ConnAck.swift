import NIOCore

/// CONNACK (§3.2): the server's answer to CONNECT.
///
/// ```
/// +------+-----------+-------------------+-------------+------------+
/// | 0x20 | Rem. Len. | Acknowledge Flags | Reason Code | Properties |
/// +------+-----------+-------------------+-------------+------------+
///   Acknowledge Flags: bits 7–1 reserved (0), bit 0 Session Present
/// ```
///
/// The broker's limits (Receive Maximum, Maximum Packet Size, Maximum QoS,
/// Topic Alias Maximum, Server Keep Alive…) arrive as properties.
public struct ConnAck: Hashable, Sendable {
    public var sessionPresent: Bool
    public var reasonCode: ReasonCode
    public var properties: Properties

    public init(sessionPresent: Bool, reasonCode: ReasonCode, properties: Properties = []) {
        self.sessionPresent = sessionPresent
        self.reasonCode = reasonCode
        self.properties = properties
    }

    init(reading reader: inout PacketReader) throws(MQTT5Error) {
        let flags = try reader.byte("Acknowledge Flags")
        guard flags & 0xFE == 0 else {
            throw .protocolViolation(.connack, section: "3.2.2.1", rule: "reserved Acknowledge Flags bits must be 0")
        }
        sessionPresent = flags & 0x01 != 0
        reasonCode = try ReasonCode.decode(try reader.byte("Reason Code"), in: .connack)
        guard !(sessionPresent && reasonCode.isFailure) else {
            throw .protocolViolation(.connack, section: "3.2.2.1.1", rule: "Session Present must be 0 with a failure Reason Code")
        }
        properties = try Properties.read(from: &reader, in: .connack)
        try reader.finish()
    }

    func writeBody(into buffer: inout ByteBuffer) throws(MQTT5Error) {
        guard reasonCode.isAllowed(in: .connack) else { throw .invalidReasonCode(.connack, code: reasonCode.rawValue) }
        buffer.writeInteger(UInt8(sessionPresent ? 1 : 0))
        buffer.writeInteger(reasonCode.rawValue)
        try properties.write(to: &buffer, in: .connack)
    }
}
