/// Reason codes carried in `CODE` records (`wire.md` section 6). Unknown
/// codes are kept as they are, so a newer server's reasons still reach logs.
public struct WireCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    public static let protocolError = WireCode(rawValue: 1)
    public static let versionUnsupported = WireCode(rawValue: 2)
    public static let tokenInvalid = WireCode(rawValue: 3)
    public static let tokenExpired = WireCode(rawValue: 4)
    public static let forbidden = WireCode(rawValue: 5)
    public static let overloaded = WireCode(rawValue: 6)
    public static let unknownSession = WireCode(rawValue: 7)
    public static let sessionClosed = WireCode(rawValue: 8)
    public static let shutdown = WireCode(rawValue: 9)
    public static let frameTooLarge = WireCode(rawValue: 10)

    public var description: String {
        switch rawValue {
        case 1: "PROTOCOL"
        case 2: "VERSION_UNSUPPORTED"
        case 3: "TOKEN_INVALID"
        case 4: "TOKEN_EXPIRED"
        case 5: "FORBIDDEN"
        case 6: "OVERLOADED"
        case 7: "UNKNOWN_SESSION"
        case 8: "SESSION_CLOSED"
        case 9: "SHUTDOWN"
        case 10: "FRAME_TOO_LARGE"
        default: "CODE_\(rawValue)"
        }
    }
}
