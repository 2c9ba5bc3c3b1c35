import JSONText
import MQTT5

/// What the broker granted in its last CONNACK, beside what CONNECT asked: shown in STATUS
/// (`link.mqtt_broker`, imagent-mqtt(7)), and each limit that costs the operator something is
/// a warning in the log, with what it costs and what to do.
struct MQTTBrokerGrant: Hashable, Sendable {
    var limits: BrokerLimits
    /// `[mqtt] session_expiry_seconds`, as CONNECT asked.
    var requestedSessionExpiry: UInt32
    /// `[limits] max_payload_bytes`; nil: not known here.
    var maxPayloadBytes: Int?
    /// An `up` PUBLISH's bytes beside its body, at most.
    var publishOverhead: Int

    init(_ limits: BrokerLimits, settings: MQTTLinkSettings) {
        self.limits = limits
        requestedSessionExpiry = settings.sessionExpirySeconds
        maxPayloadBytes = settings.maxPayloadBytes
        publishOverhead = settings.publishOverhead
    }

    /// The session expiry in force: the broker's when CONNACK set one, else the one asked for.
    var sessionExpiry: UInt32 { limits.sessionExpiryInterval ?? requestedSessionExpiry }

    /// The largest message body the broker's Maximum Packet Size lets through on every `up` topic.
    var largestUpBody: Int { max(0, limits.maximumPacketSize - publishOverhead) }

    var warnings: [String] {
        var warnings: [String] = []
        if sessionExpiry < requestedSessionExpiry {
            warnings.append("mqtt: the broker grants a session expiry of \(sessionExpiry) s, less than the \(requestedSessionExpiry) s "
                + "of [mqtt] session_expiry_seconds: after an outage longer than \(sessionExpiry) s the broker has forgotten this "
                + "host's subscription and drops the down messages published meanwhile; raise the broker's limit "
                + "(ejabberd: mod_mqtt session_expiry) if outages can last longer")
        }
        if let maxPayloadBytes, largestUpBody < maxPayloadBytes {
            warnings.append("mqtt: the broker's Maximum Packet Size of \(limits.maximumPacketSize) bytes lets messages of at most "
                + "\(largestUpBody) bytes through, less than [limits] max_payload_bytes (\(maxPayloadBytes)): larger ones fail "
                + "with PAYLOAD_TOO_LARGE; raise the broker's limit or lower max_payload_bytes")
        }
        return warnings
    }

    /// STATUS's `link.mqtt_broker` object.
    var json: String {
        var json = JSONWriter()
        json.beginObject()
        json.field("session_expiry_s", Int(sessionExpiry))
        json.field("session_expiry_requested_s", Int(requestedSessionExpiry))
        json.field("receive_maximum", limits.receiveMaximum)
        json.field("maximum_packet_size", limits.maximumPacketSize)
        json.field("largest_message_bytes", largestUpBody)
        json.field("topic_alias_maximum", limits.topicAliasMaximum)
        json.field("maximum_qos", Int(limits.maximumQoS.rawValue))
        json.field("retain_available", limits.retainAvailable)
        json.field("shared_subscription_available", limits.sharedSubscriptionAvailable)
        json.field("server_keep_alive_s", limits.serverKeepAlive.map(Int.init))
        json.field("warnings", warnings.count)
        json.endObject()
        return json.text
    }
}
