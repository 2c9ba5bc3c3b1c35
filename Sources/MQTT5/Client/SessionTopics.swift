/// The topics of imagent's MQTT upstream (issue 14): a session of service S
/// with id N publishes on `{prefix}/{clientID}/{S}/{N}/up` and receives on
/// `{prefix}/{clientID}/{S}/{N}/down`; the daemon subscribes to
/// `{prefix}/{clientID}/+/+/down`.
///
/// The client identifier and the service fill one topic level each, so they
/// may not contain `/`, `+` or `#` (which would change the topic's shape or be
/// a wildcard) nor a code point a broker may refuse (`RefusableCodePoints`:
/// one such topic makes mosquitto drop the whole link, for every session); the
/// prefix may span several levels but has no wildcard and no empty level. N is
/// the session id in decimal.
///
/// `checkService` is the one rule for service names: the daemon applies it at
/// OPEN whatever the upstream, so a name that works on one works on the other.
public struct SessionTopics: Hashable, Sendable {
    public let prefix: String
    public let clientID: String
    /// `{prefix}/{clientID}/`, the start of every `down` topic of this client, as bytes.
    private let downHead: [UInt8]

    public enum NamingError: Error, Hashable, Sendable, CustomStringConvertible {
        /// `what` ("topic_prefix", "client_id", "service") cannot appear in a topic as it is.
        case unusable(what: String, value: String, reason: String)

        public var description: String {
            switch self {
            case .unusable(let what, let value, let reason):
                "\(what) \"\(RefusableCodePoints.escaped(value))\" cannot be used in an MQTT topic: \(reason)"
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
        self.downHead = Array("\(prefix)/\(clientID)/".utf8)
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
    /// Runs for every message received, so it compares bytes: String's own comparisons are
    /// Unicode-aware, and building the head and the levels as strings allocates per message.
    public func parseDown(_ topic: String) -> (service: String, session: UInt64)? {
        let bytes = topic.utf8
        let tail = "/down".utf8
        guard bytes.count > downHead.count + tail.count, bytes.starts(with: downHead), bytes.suffix(tail.count).elementsEqual(tail)
        else { return nil }
        let middle = bytes.dropFirst(downHead.count).dropLast(tail.count)
        guard let slash = middle.firstIndex(of: UInt8(ascii: "/")) else { return nil }
        let serviceBytes = middle[..<slash]
        guard !serviceBytes.isEmpty, let session = Self.sessionID(middle[middle.index(after: slash)...]),
              let service = String(serviceBytes)
        else { return nil }
        return (service, session)
    }

    /// A session id as the daemon writes it: decimal, no sign, no leading zero, above 0, within UInt64.
    private static func sessionID(_ digits: Substring.UTF8View) -> UInt64? {
        guard let first = digits.first, first != UInt8(ascii: "0") else { return nil }
        var value: UInt64 = 0
        for byte in digits {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
            let (shifted, overflow) = value.multipliedReportingOverflow(by: 10)
            let (sum, carry) = shifted.addingReportingOverflow(UInt64(byte - UInt8(ascii: "0")))
            guard !overflow, !carry else { return nil }
            value = sum
        }
        return value
    }

    private static func checkLevel(_ level: String, what: String, whole: String) throws(NamingError) {
        guard !level.isEmpty else {
            throw .unusable(what: what, value: whole, reason: whole.isEmpty ? "it is empty" : "it has an empty level")
        }
        for scalar in level.unicodeScalars {
            switch scalar {
            case "+", "#": throw .unusable(what: what, value: whole, reason: "'\(scalar)' is an MQTT wildcard")
            case "/": throw .unusable(what: what, value: whole, reason: "'/' separates topic levels")
            default:
                if let reason = RefusableCodePoints.reason(scalar) { throw .unusable(what: what, value: whole, reason: reason) }
            }
        }
    }
}
