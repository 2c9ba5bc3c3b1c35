import NIOCore

/// DISCONNECT (§3.14) and AUTH (§3.15), which share one layout; the packet
/// type says which it is.
///
/// ```
/// +-----------+-----------+-------------+------------+
/// | 0xE0/0xF0 | Rem. Len. | Reason Code | Properties |
/// +-----------+-----------+-------------+------------+
///   Remaining Length 0: Reason Code 0x00 and no properties are implied;
///   Remaining Length 1: no Property Length, 0 is implied (§3.14.2.2).
/// ```
///
/// AUTH's text (§3.15.2) only names the empty form; a Remaining Length of 1 is
/// accepted there too, as for DISCONNECT (a decision). The encoder writes the
/// shortest form: nothing for Success without properties, the Reason Code
/// alone when there are no properties (DISCONNECT), else both.
public struct Disconnect: Hashable, Sendable {
    public var reasonCode: ReasonCode
    public var properties: Properties

    public init(reasonCode: ReasonCode = .normalDisconnection, properties: Properties = []) {
        self.reasonCode = reasonCode
        self.properties = properties
    }

    init(reading reader: inout PacketReader, context: PropertyContext) throws(MQTT5Error) {
        reasonCode = reader.remaining > 0 ? try ReasonCode.decode(try reader.byte("Reason Code"), in: reader.type) : .success
        properties = reader.remaining > 0 ? try Properties.read(from: &reader, in: context) : []
        try reader.finish()
    }

    func writeBody(into buffer: inout ByteBuffer, context: PropertyContext) throws(MQTT5Error) {
        guard reasonCode.isAllowed(in: context.packetType) else {
            throw .invalidReasonCode(context.packetType, code: reasonCode.rawValue)
        }
        if reasonCode == .success && properties.isEmpty { return }
        buffer.writeInteger(reasonCode.rawValue)
        if !properties.isEmpty || context == .auth {
            try properties.write(to: &buffer, in: context)
        }
    }
}

/// AUTH carries the same fields as DISCONNECT.
public typealias Auth = Disconnect
