import NIOCore

/// UNSUBSCRIBE (§3.10).
///
/// ```
/// +------+-----------+-------------------+------------+--------------+--
/// | 0xA2 | Rem. Len. | Packet Identifier | Properties | Topic Filter | … (at least one)
/// |      |           |                   |            | (UTF-8)      |
/// +------+-----------+-------------------+------------+--------------+--
/// ```
public struct Unsubscribe: Hashable, Sendable {
    public var packetIdentifier: UInt16
    public var properties: Properties
    public var topicFilters: [String]

    public init(packetIdentifier: UInt16, properties: Properties = [], topicFilters: [String]) {
        self.packetIdentifier = packetIdentifier
        self.properties = properties
        self.topicFilters = topicFilters
    }

    init(reading reader: inout PacketReader) throws(MQTT5Error) {
        packetIdentifier = try reader.uint16("Packet Identifier")
        properties = try Properties.read(from: &reader, in: .unsubscribe)
        topicFilters = []
        while reader.remaining > 0 {
            topicFilters.append(try reader.string("Topic Filter"))
        }
        try check()
    }

    func writeBody(into buffer: inout ByteBuffer) throws(MQTT5Error) {
        try check()
        buffer.writeInteger(packetIdentifier)
        try properties.write(to: &buffer, in: .unsubscribe)
        for filter in topicFilters {
            try buffer.writeMQTTString(filter, field: "Topic Filter")
        }
    }

    private func check() throws(MQTT5Error) {
        guard packetIdentifier != 0 else {
            throw .protocolViolation(.unsubscribe, section: "2.2.1", rule: "Packet Identifier must be non-zero [MQTT-2.2.1-3]")
        }
        guard !topicFilters.isEmpty else {
            throw .protocolViolation(.unsubscribe, section: "3.10.3", rule: "at least one Topic Filter is required [MQTT-3.10.3-2]")
        }
        for filter in topicFilters where !Topic.isValidFilter(filter) {
            throw .protocolViolation(.unsubscribe, section: filter.hasPrefix("$share/") ? "4.8.2" : "4.7.1", rule: "\"\(filter)\" is not a valid Topic Filter")
        }
    }
}
