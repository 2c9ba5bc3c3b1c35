import MQTT5

/// The MQTT 5 upstream's part of the link configuration (`[mqtt]`,
/// imagent-mqtt(7)): the names, and what CONNECT announces.
struct MQTTLinkSettings: Hashable, Sendable {
    var clientID: String
    /// User Name in CONNECT; nil: none.
    var username: String?
    /// Whether `[auth]` names a token, which is then the Password.
    var passwordFromToken: Bool
    var sessionExpirySeconds: UInt32
    var topicPrefix: String
    /// QoS 1 messages the broker may have unacknowledged towards us (Receive Maximum in CONNECT).
    var receiveMaximum: UInt16 = 1_024
    /// `[limits] max_payload_bytes`, to warn when the broker's limits make such a message unsendable; nil: unknown.
    var maxPayloadBytes: Int?

    init(clientID: String, username: String? = nil, passwordFromToken: Bool = false, sessionExpirySeconds: UInt32 = 86_400,
         topicPrefix: String = "imagent") {
        self.clientID = clientID
        self.username = username
        self.passwordFromToken = passwordFromToken
        self.sessionExpirySeconds = sessionExpirySeconds
        self.topicPrefix = topicPrefix
    }

    init(_ settings: DaemonConfiguration.MQTTSettings, agentID: String, hasToken: Bool) {
        self.init(clientID: settings.clientID.isEmpty ? agentID : settings.clientID,
                  username: settings.username.isEmpty ? nil : settings.username,
                  passwordFromToken: hasToken,
                  sessionExpirySeconds: settings.sessionExpirySeconds,
                  topicPrefix: settings.topicPrefix)
    }

    /// The topic names; throws when the client id (the agent id, by default) or the prefix cannot be topic levels.
    func topics() throws(LinkConfigurationError) -> SessionTopics {
        do {
            return try SessionTopics(prefix: topicPrefix, clientID: clientID)
        } catch {
            throw LinkConfigurationError("[mqtt] \(error)")
        }
    }

    /// The longest service name a session may have (AgentIPC's SERVICE), for the PUBLISH overhead.
    static let maxServiceBytes = 255

    /// Bytes of an `up` PUBLISH besides its payload, at most: fixed header (5), topic (2 + its
    /// longest form), packet identifier (2), properties (4 + the `imagent-seq` user property of
    /// at most 36 + a topic alias of 3).
    var publishOverhead: Int {
        let topic = topicPrefix.utf8.count + clientID.utf8.count + Self.maxServiceBytes + "////up".utf8.count + 20
        return 5 + 2 + topic + 2 + 4 + 36 + 3
    }

    /// The Maximum Packet Size we announce: a DATA body of `maxFrame` with a `down` topic's overhead.
    func maximumPacketSize(maxFrame: UInt32) -> UInt32 {
        UInt32(clamping: Int(maxFrame) + publishOverhead + 64)
    }

    /// The keep-alive CONNECT asks for: twice the heartbeat's longest interval, and at least
    /// `minimumKeepAliveSeconds`. The daemon judges the link by its heartbeat (two PINGs
    /// unanswered, then a probe); the broker, which closes a connection after 1.5 times the
    /// keep-alive of silence, is the backstop for a host that vanished, and acts only after the
    /// heartbeat would have. A keep-alive as short as the heartbeat lets the broker close lossy
    /// links the heartbeat still keeps, and each such close can cost a session at ejabberd 23.01
    /// (imagent-mqtt(7), BROKERS).
    static func keepAlive(heartbeatMax: Duration) -> UInt16 {
        UInt16(clamping: max(minimumKeepAliveSeconds, 2 * heartbeatMax.components.seconds))
    }

    /// The shortest keep-alive CONNECT asks for, whatever the heartbeat.
    static let minimumKeepAliveSeconds: Int64 = 30
}
