/// `imagent status`'s lines for STATUS's `link.mqtt_broker`: what the MQTT broker granted at
/// its last CONNACK, with the limits that cost the operator something said in words. The
/// daemon sends the object only with `protocol = "mqtt"` once a CONNACK came.
enum BrokerGrantText {
    static let known: Set<String> = [
        "session_expiry_s", "session_expiry_requested_s", "receive_maximum", "maximum_packet_size", "largest_message_bytes",
        "topic_alias_maximum", "maximum_qos", "retain_available", "shared_subscription_available", "server_keep_alive_s", "warnings",
    ]

    static func add(_ grant: JSONValue, to fields: inout FieldList) {
        let keepAlive = grant["server_keep_alive_s"].flatMap { $0 == .null ? nil : "keep-alive \(HumanFormat.quantity($0, unit: "s")) (the broker's)" }
        fields.add("mqtt broker", "QoS up to \(grant["maximum_qos"].displayText), "
            + "receive maximum \(grant["receive_maximum"].displayText), "
            + "topic aliases \(grant["topic_alias_maximum"].displayText), "
            + "retain \(grant["retain_available"].displayText), "
            + "shared subscriptions \(grant["shared_subscription_available"].displayText), "
            + (keepAlive ?? "keep-alive as asked"))

        let granted = grant["session_expiry_s"], requested = grant["session_expiry_requested_s"]
        let shortExpiry = (granted?.double).flatMap { given in (requested?.double).map { given < $0 } } ?? false
        fields.add("session expiry", shortExpiry
            ? "\(granted.displayText) s granted (\(requested.displayText) s requested): an outage longer than that "
                + "loses down messages at the broker"
            : "\(granted.displayText) s granted")

        // `warnings` counts the short expiry and a packet size below [limits] max_payload_bytes; the
        // second is the one left when the count is larger than what the expiry explains.
        let smallPackets = (grant["warnings"]?.double ?? 0) > (shortExpiry ? 1 : 0)
        fields.add("packet size", "at most \(HumanFormat.bytes(grant["maximum_packet_size"])), "
            + "largest message \(HumanFormat.bytes(grant["largest_message_bytes"]))"
            + (smallPackets ? ": less than [limits] max_payload_bytes, larger messages fail with PAYLOAD_TOO_LARGE" : ""))
        fields.addUnknown(of: grant, known: known, prefix: "mqtt broker")
    }
}
