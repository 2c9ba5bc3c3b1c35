/// TLV record tags of IMLink/1 (`wire.md` section 2). A struct, not an enum:
/// tags this implementation does not know must pass through untouched.
public struct RecordTag: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    public static let versionMin = RecordTag(rawValue: 0x0001)
    public static let versionMax = RecordTag(rawValue: 0x0002)
    public static let features = RecordTag(rawValue: 0x0003)
    public static let agentID = RecordTag(rawValue: 0x0004)
    public static let agentVersion = RecordTag(rawValue: 0x0005)
    public static let maxFrame = RecordTag(rawValue: 0x0006)
    public static let version = RecordTag(rawValue: 0x0007)
    public static let token = RecordTag(rawValue: 0x0010)
    public static let heartbeatMS = RecordTag(rawValue: 0x0011)
    public static let serverTimeMS = RecordTag(rawValue: 0x0012)
    public static let code = RecordTag(rawValue: 0x0013)
    public static let message = RecordTag(rawValue: 0x0014)
    public static let retryAfterMS = RecordTag(rawValue: 0x0015)
    public static let redirect = RecordTag(rawValue: 0x0016)
    public static let service = RecordTag(rawValue: 0x0020)
    public static let resumeAfter = RecordTag(rawValue: 0x0021)
    public static let lastAcked = RecordTag(rawValue: 0x0022)
    public static let window = RecordTag(rawValue: 0x0023)
    public static let timestampUS = RecordTag(rawValue: 0x0030)

    static let names: [UInt16: String] = [
        0x0001: "VERSION_MIN", 0x0002: "VERSION_MAX", 0x0003: "FEATURES", 0x0004: "AGENT_ID",
        0x0005: "AGENT_VERSION", 0x0006: "MAX_FRAME", 0x0007: "VERSION", 0x0010: "TOKEN",
        0x0011: "HEARTBEAT_MS", 0x0012: "SERVER_TIME_MS", 0x0013: "CODE", 0x0014: "MESSAGE",
        0x0015: "RETRY_AFTER_MS", 0x0016: "REDIRECT", 0x0020: "SERVICE", 0x0021: "RESUME_AFTER",
        0x0022: "LAST_ACKED", 0x0023: "WINDOW", 0x0030: "TIMESTAMP_US",
    ]

    public var description: String {
        RecordTag.names[rawValue] ?? "0x" + String(rawValue, radix: 16)
    }
}
