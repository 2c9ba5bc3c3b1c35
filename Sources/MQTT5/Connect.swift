import NIOCore

/// CONNECT (§3.1): the first packet a client sends.
///
/// ```
/// +------+-----------+-----------------------+------+-------+------------+------------+
/// | 0x10 | Rem. Len. | 00 04 'M' 'Q' 'T' 'T' |  05  | flags | Keep Alive | Properties |
/// +------+-----------+-----------------------+------+-------+------------+------------+
///   flags: 7 User Name | 6 Password | 5 Will Retain | 4–3 Will QoS | 2 Will | 1 Clean Start | 0 reserved (0)
///
/// Payload, in this order, each but the first present only when its flag is set:
/// +-------------------+-----------------+------------+--------------+-----------+----------+
/// | Client Identifier | Will Properties | Will Topic | Will Payload | User Name | Password |
/// | (UTF-8)           |                 | (UTF-8)    | (Binary)     | (UTF-8)   | (Binary) |
/// +-------------------+-----------------+------------+--------------+-----------+----------+
/// ```
///
/// Only Protocol Version 5 is accepted; a Will Topic must be a valid Topic Name.
public struct Connect: Hashable, Sendable {
    public struct Will: Hashable, Sendable {
        public var topic: String
        public var payload: ByteBuffer
        public var qos: QoS
        public var retain: Bool
        public var properties: Properties

        public init(topic: String, payload: ByteBuffer, qos: QoS = .atMostOnce, retain: Bool = false, properties: Properties = []) {
            self.topic = topic
            self.payload = payload
            self.qos = qos
            self.retain = retain
            self.properties = properties
        }
    }

    public var clientIdentifier: String
    public var cleanStart: Bool
    /// Seconds; 0 turns the keep-alive mechanism off (§3.1.2.10).
    public var keepAlive: UInt16
    public var properties: Properties
    public var will: Will?
    public var userName: String?
    /// MQTT 5 allows a password without a user name (§3.1.2.9).
    public var password: ByteBuffer?

    public init(clientIdentifier: String, cleanStart: Bool, keepAlive: UInt16, properties: Properties = [],
                will: Will? = nil, userName: String? = nil, password: ByteBuffer? = nil) {
        self.clientIdentifier = clientIdentifier
        self.cleanStart = cleanStart
        self.keepAlive = keepAlive
        self.properties = properties
        self.will = will
        self.userName = userName
        self.password = password
    }

    static let protocolName = "MQTT"
    static let protocolVersion: UInt8 = 5

    init(reading reader: inout PacketReader) throws(MQTT5Error) {
        guard try reader.string("Protocol Name") == Self.protocolName else {
            throw .protocolViolation(.connect, section: "3.1.2.1", rule: "protocol name must be \"MQTT\"")
        }
        let version = try reader.byte("Protocol Version")
        guard version == Self.protocolVersion else {
            throw .protocolViolation(.connect, section: "3.1.2.2", rule: "protocol version \(version) is not 5")
        }
        let flags = try reader.byte("Connect Flags")
        guard flags & 0x01 == 0 else {
            throw .protocolViolation(.connect, section: "3.1.2.3", rule: "the reserved Connect Flags bit must be 0")
        }
        let hasWill = flags & 0x04 != 0
        let willQoSBits = (flags >> 3) & 0x03
        let willRetain = flags & 0x20 != 0
        guard let willQoS = QoS(rawValue: willQoSBits) else {
            throw .protocolViolation(.connect, section: "3.1.2.6", rule: "Will QoS 3 is not a QoS")
        }
        guard hasWill || (willQoS == .atMostOnce && !willRetain) else {
            throw .protocolViolation(.connect, section: "3.1.2.6", rule: "Will QoS and Will Retain must be 0 without a Will")
        }
        cleanStart = flags & 0x02 != 0
        keepAlive = try reader.uint16("Keep Alive")
        properties = try Properties.read(from: &reader, in: .connect)
        clientIdentifier = try reader.string("Client Identifier")
        if hasWill {
            let willProperties = try Properties.read(from: &reader, in: .will)
            let topic = try reader.string("Will Topic")
            guard Topic.isValidName(topic) else {
                throw .protocolViolation(.connect, section: "3.1.3.3", rule: "Will Topic \"\(topic)\" is not a valid Topic Name")
            }
            let payload = try reader.binary("Will Payload")
            will = Will(topic: topic, payload: payload, qos: willQoS, retain: willRetain, properties: willProperties)
        } else {
            will = nil
        }
        userName = flags & 0x80 != 0 ? try reader.string("User Name") : nil
        password = flags & 0x40 != 0 ? try reader.binary("Password") : nil
        try reader.finish()
    }

    func writeBody(into buffer: inout ByteBuffer) throws(MQTT5Error) {
        try buffer.writeMQTTString(Self.protocolName, field: "Protocol Name")
        buffer.writeInteger(Self.protocolVersion)
        var flags: UInt8 = cleanStart ? 0x02 : 0
        if let will {
            guard Topic.isValidName(will.topic) else {
                throw .protocolViolation(.connect, section: "3.1.3.3", rule: "Will Topic \"\(will.topic)\" is not a valid Topic Name")
            }
            flags |= 0x04 | will.qos.rawValue << 3 | (will.retain ? 0x20 : 0)
        }
        if userName != nil { flags |= 0x80 }
        if password != nil { flags |= 0x40 }
        buffer.writeInteger(flags)
        buffer.writeInteger(keepAlive)
        try properties.write(to: &buffer, in: .connect)
        try buffer.writeMQTTString(clientIdentifier, field: "Client Identifier")
        if let will {
            try will.properties.write(to: &buffer, in: .will)
            try buffer.writeMQTTString(will.topic, field: "Will Topic")
            try buffer.writeMQTTBinary(will.payload, field: "Will Payload")
        }
        if let userName { try buffer.writeMQTTString(userName, field: "User Name") }
        if let password { try buffer.writeMQTTBinary(password, field: "Password") }
    }
}
