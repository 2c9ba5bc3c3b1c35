import MQTT5

extension DaemonConfiguration {
    /// `[server] protocol`: what the link speaks to the endpoints.
    enum UpstreamProtocol: String, Hashable, Sendable, CaseIterable {
        /// IMLink/1 to an IMLink server (wire.md).
        case imlink
        /// MQTT 5 to a broker, sessions mapped to topics (imagent-mqtt(7)).
        case mqtt
    }

    /// `[mqtt]`: the MQTT 5 upstream's names (imagent-mqtt(7)).
    struct MQTTSettings: Hashable, Sendable {
        /// The MQTT Client Identifier and the second topic level; empty: the agent id.
        var clientID = ""
        /// User Name in CONNECT; empty: none. The `[auth]` token, when one is configured, is the password.
        var username = ""
        /// Session Expiry Interval in CONNECT: how long the broker keeps the session (and its queued messages) while the host is away.
        var sessionExpirySeconds: UInt32 = 86_400
        /// The first topic level(s).
        var topicPrefix = "imagent"

        /// The `[mqtt]` keys, for the loader's schema.
        static let keys: [(String, KeyReader)] = [
            ("client_id", { c, v in
                string(v, length: 1...256).map { c.mqtt.clientID = $0 }.failure ?? topicProblem(prefix: "imagent", clientID: c.mqtt.clientID)
            }),
            ("username", { c, v in string(v, length: 0...1_024).map { c.mqtt.username = $0 }.failure }),
            ("session_expiry_seconds", { c, v in
                integer(v, in: 0...Int(UInt32.max)).map { c.mqtt.sessionExpirySeconds = UInt32($0) }.failure
            }),
            ("topic_prefix", { c, v in
                string(v, length: 1...1_024).map { c.mqtt.topicPrefix = $0 }.failure ?? topicProblem(prefix: c.mqtt.topicPrefix, clientID: "x")
            }),
        ]

        /// Why `agentID`, the default client id, cannot be one; nil when it can (or is derived, always usable).
        func agentIDProblem(_ agentID: String) -> String? {
            guard !agentID.isEmpty, let problem = Self.topicProblem(prefix: topicPrefix, clientID: agentID) else { return nil }
            return "server.agent_id is the MQTT client id when [mqtt] client_id is not set: \(problem); set [mqtt] client_id"
        }

        private static func topicProblem(prefix: String, clientID: String) -> String? {
            do {
                _ = try SessionTopics(prefix: prefix, clientID: clientID)
                return nil
            } catch {
                return "\(error)"
            }
        }
    }
}

extension DaemonConfiguration {
    /// The token source the link uses: `[auth]`, else the packaged credential for IMLink
    /// (which needs a token), else none for MQTT (a broker may take anonymous clients).
    var linkToken: TokenSource {
        token ?? (server.upstreamProtocol == .mqtt ? .absent : .credential(LinkConfiguration.defaultCredential))
    }
}
