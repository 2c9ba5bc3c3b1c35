import NIOCore

/// SUBSCRIBE (§3.8).
///
/// ```
/// +------+-----------+-------------------+------------+--------------+---------+--
/// | 0x82 | Rem. Len. | Packet Identifier | Properties | Topic Filter | Options | … (at least one pair)
/// |      |           |                   |            | (UTF-8)      | (byte)  |
/// +------+-----------+-------------------+------------+--------------+---------+--
///   Options: 7–6 reserved (0) | 5–4 Retain Handling | 3 Retain As Published | 2 No Local | 1–0 Maximum QoS
/// ```
public struct Subscribe: Hashable, Sendable {
    public struct Subscription: Hashable, Sendable {
        public var topicFilter: String
        public var maximumQoS: QoS
        public var noLocal: Bool
        public var retainAsPublished: Bool
        /// 0 send retained messages at subscribe, 1 only for a new subscription, 2 never (§3.8.3.1).
        public var retainHandling: UInt8

        public init(topicFilter: String, maximumQoS: QoS, noLocal: Bool = false, retainAsPublished: Bool = false, retainHandling: UInt8 = 0) {
            self.topicFilter = topicFilter
            self.maximumQoS = maximumQoS
            self.noLocal = noLocal
            self.retainAsPublished = retainAsPublished
            self.retainHandling = retainHandling
        }

        var options: UInt8 {
            retainHandling << 4 | (retainAsPublished ? 0x08 : 0) | (noLocal ? 0x04 : 0) | maximumQoS.rawValue
        }
    }

    public var packetIdentifier: UInt16
    public var properties: Properties
    public var subscriptions: [Subscription]

    public init(packetIdentifier: UInt16, properties: Properties = [], subscriptions: [Subscription]) {
        self.packetIdentifier = packetIdentifier
        self.properties = properties
        self.subscriptions = subscriptions
    }

    init(reading reader: inout PacketReader) throws(MQTT5Error) {
        packetIdentifier = try reader.uint16("Packet Identifier")
        properties = try Properties.read(from: &reader, in: .subscribe)
        subscriptions = []
        while reader.remaining > 0 {
            let filter = try reader.string("Topic Filter")
            let options = try reader.byte("Subscription Options")
            guard options & 0xC0 == 0 else {
                throw .protocolViolation(.subscribe, section: "3.8.3.1", rule: "reserved Subscription Options bits must be 0 [MQTT-3.8.3-5]")
            }
            guard let qos = QoS(rawValue: options & 0x03) else {
                throw .protocolViolation(.subscribe, section: "3.8.3.1", rule: "Maximum QoS 3 is not a QoS")
            }
            subscriptions.append(Subscription(
                topicFilter: filter, maximumQoS: qos, noLocal: options & 0x04 != 0,
                retainAsPublished: options & 0x08 != 0, retainHandling: (options >> 4) & 0x03))
        }
        try check()
    }

    func writeBody(into buffer: inout ByteBuffer) throws(MQTT5Error) {
        try check()
        buffer.writeInteger(packetIdentifier)
        try properties.write(to: &buffer, in: .subscribe)
        for subscription in subscriptions {
            try buffer.writeMQTTString(subscription.topicFilter, field: "Topic Filter")
            buffer.writeInteger(subscription.options)
        }
    }

    private func check() throws(MQTT5Error) {
        guard packetIdentifier != 0 else {
            throw .protocolViolation(.subscribe, section: "2.2.1", rule: "Packet Identifier must be non-zero [MQTT-2.2.1-3]")
        }
        guard !subscriptions.isEmpty else {
            throw .protocolViolation(.subscribe, section: "3.8.3", rule: "at least one Topic Filter is required [MQTT-3.8.3-2]")
        }
        for subscription in subscriptions {
            guard Topic.isValidFilter(subscription.topicFilter) else {
                throw .protocolViolation(.subscribe, section: subscription.topicFilter.hasPrefix("$share/") ? "4.8.2" : "4.7.1", rule: "\"\(subscription.topicFilter)\" is not a valid Topic Filter")
            }
            guard subscription.retainHandling < 3 else {
                throw .protocolViolation(.subscribe, section: "3.8.3.1", rule: "Retain Handling 3 is reserved")
            }
            guard !(subscription.noLocal && subscription.topicFilter.hasPrefix("$share/")) else {
                throw .protocolViolation(.subscribe, section: "3.8.3.1", rule: "No Local on a Shared Subscription [MQTT-3.8.3-4]")
            }
        }
    }
}
