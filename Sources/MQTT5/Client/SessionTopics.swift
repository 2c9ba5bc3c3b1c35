/// The topics of imagent's MQTT upstream (issue 14): a session of service S
/// with id N publishes on `{prefix}/{clientID}/{S}/{N}/up` and receives on
/// `{prefix}/{clientID}/{S}/{N}/down`; the daemon subscribes to
/// `{prefix}/{clientID}/+/+/down`.
///
/// The client identifier and the service fill one topic level each, so they
/// may not contain `/`, `+` or `#` (which would change the topic's shape or be
/// a wildcard) nor U+0000 (§1.5.4); the prefix may span several levels but has
/// no wildcard and no empty level. N is the session id in decimal.
public struct SessionTopics: Hashable, Sendable {
    public let prefix: String
    public let clientID: String

    public enum NamingError: Error, Hashable, Sendable, CustomStringConvertible {
        /// `what` ("topic_prefix", "client_id", "service") cannot appear in a topic as it is.
        case unusable(what: String, value: String, reason: String)

        public var description: String {
            switch self {
            case .unusable(let what, let value, let reason):
                "\(what) \"\(value)\" cannot be used in an MQTT topic: \(reason)"
            }
        }
    }

    public init(prefix: String, clientID: String) throws(NamingError) {
        guard !prefix.isEmpty else { throw .unusable(what: "topic_prefix", value: prefix, reason: "it is empty") }
        for level in prefix.split(separator: "/", omittingEmptySubsequences: false) {
            try Self.checkLevel(String(level), what: "topic_prefix", whole: prefix)
        }
        try Self.checkLevel(clientID, what: "client_id", whole: clientID)
        self.prefix = prefix
        self.clientID = clientID
    }

    /// Throws if `service` cannot be one topic level.
    public static func checkService(_ service: String) throws(NamingError) {
        try checkLevel(service, what: "service", whole: service)
    }

    public func up(service: String, session: UInt64) throws(NamingError) -> String {
        try topic(service: service, session: session, direction: "up")
    }

    public func down(service: String, session: UInt64) throws(NamingError) -> String {
        try topic(service: service, session: session, direction: "down")
    }

    private func topic(service: String, session: UInt64, direction: String) throws(NamingError) -> String {
        try Self.checkService(service)
        let topic = "\(prefix)/\(clientID)/\(service)/\(session)/\(direction)"
        guard topic.utf8.count <= MQTTString.maxLength else {
            throw .unusable(what: "service", value: service, reason: "the topic would be longer than 65535 bytes")
        }
        return topic
    }

    /// The filter the daemon subscribes at QoS 1.
    public var downFilter: String { "\(prefix)/\(clientID)/+/+/down" }

    /// The service and session of a `down` topic of this client; nil for any other topic.
    public func parseDown(_ topic: String) -> (service: String, session: UInt64)? {
        let head = "\(prefix)/\(clientID)/"
        guard topic.hasPrefix(head), topic.hasSuffix("/down") else { return nil }
        let middle = topic.utf8.dropFirst(head.utf8.count).dropLast("/down".utf8.count)
        let levels = middle.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        guard levels.count == 2, let service = String(levels[0]), !service.isEmpty,
              let digits = String(levels[1]), let session = UInt64(digits), String(session) == digits, session > 0
        else { return nil }
        return (service, session)
    }

    private static func checkLevel(_ level: String, what: String, whole: String) throws(NamingError) {
        guard !level.isEmpty else {
            throw .unusable(what: what, value: whole, reason: whole.isEmpty ? "it is empty" : "it has an empty level")
        }
        for scalar in level.unicodeScalars {
            switch scalar {
            case "+", "#": throw .unusable(what: what, value: whole, reason: "'\(scalar)' is an MQTT wildcard")
            case "/": throw .unusable(what: what, value: whole, reason: "'/' separates topic levels")
            case "\u{0}": throw .unusable(what: what, value: whole, reason: "U+0000 is not allowed in MQTT strings")
            default: continue
            }
        }
    }
}
