/// TLV record tags of Agent IPC/1 (`ipc.md` section 3). A struct, not an
/// enum: tags a newer peer adds must pass through untouched as extensions.
public struct IPCTag: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    public static let ipcVersion = IPCTag(rawValue: 0x0001)
    public static let clientName = IPCTag(rawValue: 0x0002)
    public static let daemonVersion = IPCTag(rawValue: 0x0003)
    public static let maxPayload = IPCTag(rawValue: 0x0004)
    public static let linkState = IPCTag(rawValue: 0x0005)
    public static let session = IPCTag(rawValue: 0x0010)
    public static let service = IPCTag(rawValue: 0x0011)
    public static let priority = IPCTag(rawValue: 0x0012)
    public static let durable = IPCTag(rawValue: 0x0013)
    public static let sessionState = IPCTag(rawValue: 0x0014)
    public static let seq = IPCTag(rawValue: 0x0015)
    public static let sentSeq = IPCTag(rawValue: 0x0016)
    public static let ackedSeq = IPCTag(rawValue: 0x0017)
    public static let deliveredSeq = IPCTag(rawValue: 0x0018)
    public static let ttlMS = IPCTag(rawValue: 0x0019)
    public static let payload = IPCTag(rawValue: 0x001A)
    public static let code = IPCTag(rawValue: 0x0020)
    public static let message = IPCTag(rawValue: 0x0021)
    public static let json = IPCTag(rawValue: 0x0022)

    private static let names: [UInt16: String] = [
        0x0001: "IPC_VERSION", 0x0002: "CLIENT_NAME", 0x0003: "DAEMON_VERSION", 0x0004: "MAX_PAYLOAD",
        0x0005: "LINK_STATE", 0x0010: "SESSION", 0x0011: "SERVICE", 0x0012: "PRIORITY", 0x0013: "DURABLE",
        0x0014: "SESSION_STATE", 0x0015: "SEQ", 0x0016: "SENT_SEQ", 0x0017: "ACKED_SEQ",
        0x0018: "DELIVERED_SEQ", 0x0019: "TTL_MS", 0x001A: "PAYLOAD", 0x0020: "CODE", 0x0021: "MESSAGE",
        0x0022: "JSON",
    ]

    /// The specification's name, or the tag in hex for one it does not define.
    public var description: String {
        IPCTag.names[rawValue] ?? "0x" + String(rawValue, radix: 16)
    }
}
