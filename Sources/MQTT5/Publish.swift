import NIOCore

/// PUBLISH (§3.3): an application message, either way.
///
/// ```
/// +---------------------------+-----------+------------+-------------------+------------+---------+
/// | 0011 DUP QoS(2) RETAIN    | Rem. Len. | Topic Name | Packet Identifier | Properties | Payload |
/// |                           |           | (UTF-8)    | (QoS 1 and 2 only)|            | (rest)  |
/// +---------------------------+-----------+------------+-------------------+------------+---------+
/// ```
public struct Publish: Hashable, Sendable {
    /// Empty when a Topic Alias stands for the name (§3.3.2.3.4).
    public var topic: String
    public var qos: QoS
    /// 0 for QoS 0, which has no Packet Identifier; non-zero otherwise [MQTT-2.2.1-3].
    public var packetIdentifier: UInt16
    public var dup: Bool
    public var retain: Bool
    public var properties: Properties
    public var payload: ByteBuffer

    public init(topic: String, qos: QoS = .atMostOnce, packetIdentifier: UInt16 = 0, dup: Bool = false, retain: Bool = false,
                properties: Properties = [], payload: ByteBuffer) {
        self.topic = topic
        self.qos = qos
        self.packetIdentifier = packetIdentifier
        self.dup = dup
        self.retain = retain
        self.properties = properties
        self.payload = payload
    }

    /// Bytes the whole packet takes on the wire, fixed header included, computed
    /// without encoding it (the Maximum Packet Size check before a send).
    public var encodedSize: Int {
        let properties = self.properties.contentSize
        let body = 2 + topic.utf8.count + (qos == .atMostOnce ? 0 : 2)
            + VariableByteInteger.size(of: UInt32(clamping: properties)) + properties + payload.readableBytes
        return 1 + VariableByteInteger.size(of: UInt32(clamping: body)) + body
    }

    var flags: UInt8 { (dup ? 0x08 : 0) | qos.rawValue << 1 | (retain ? 0x01 : 0) }

    init(flags: UInt8, reading reader: inout PacketReader) throws(MQTT5Error) {
        guard let qos = QoS(rawValue: (flags >> 1) & 0x03) else {
            throw .protocolViolation(.publish, section: "3.3.1.2", rule: "QoS 3 is not a QoS [MQTT-3.3.1-4]")
        }
        self.qos = qos
        dup = flags & 0x08 != 0
        retain = flags & 0x01 != 0
        topic = try reader.string("Topic Name")
        packetIdentifier = qos == .atMostOnce ? 0 : try reader.uint16("Packet Identifier")
        properties = try Properties.read(from: &reader, in: .publish)
        payload = reader.rest()
        try check()
    }

    /// Writes the body up to the payload, which the packet's encoder places after it.
    func writeHead(into buffer: inout ByteBuffer) throws(MQTT5Error) {
        try check()
        try buffer.writeMQTTString(topic, field: "Topic Name")
        if qos != .atMostOnce { buffer.writeInteger(packetIdentifier) }
        try properties.write(to: &buffer, in: .publish)
    }

    private func check() throws(MQTT5Error) {
        if qos == .atMostOnce {
            guard !dup else { throw .protocolViolation(.publish, section: "3.3.1.1", rule: "DUP must be 0 for QoS 0 [MQTT-3.3.1-2]") }
            guard packetIdentifier == 0 else {
                throw .protocolViolation(.publish, section: "2.2.1", rule: "a QoS 0 PUBLISH has no Packet Identifier [MQTT-2.2.1-2]")
            }
        } else if packetIdentifier == 0 {
            throw .protocolViolation(.publish, section: "2.2.1", rule: "Packet Identifier must be non-zero [MQTT-2.2.1-3]")
        }
        if topic.isEmpty {
            guard properties.integer(.topicAlias) != nil else {
                throw .protocolViolation(.publish, section: "3.3.2.3.4", rule: "an empty Topic Name needs a Topic Alias")
            }
        } else if !Topic.isValidName(topic) {
            throw .protocolViolation(.publish, section: "3.3.2.1", rule: "Topic Name must not contain wildcards [MQTT-3.3.2-2]")
        }
    }
}
