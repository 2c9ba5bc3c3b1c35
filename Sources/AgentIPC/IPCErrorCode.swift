/// The codes an `ERROR` frame carries in its CODE record (`ipc.md` section 7).
/// A struct, not an enum: a newer daemon's codes still reach a client's logs.
public struct IPCErrorCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    public static let badRequest = IPCErrorCode(rawValue: 1)
    public static let versionUnsupported = IPCErrorCode(rawValue: 2)
    public static let unknownSession = IPCErrorCode(rawValue: 3)
    public static let permissionDenied = IPCErrorCode(rawValue: 4)
    public static let sessionBusy = IPCErrorCode(rawValue: 5)
    public static let queueFull = IPCErrorCode(rawValue: 6)
    public static let payloadTooLarge = IPCErrorCode(rawValue: 7)
    public static let shuttingDown = IPCErrorCode(rawValue: 8)
    public static let `internal` = IPCErrorCode(rawValue: 9)
    public static let upstreamRejected = IPCErrorCode(rawValue: 10)
    public static let sessionClosed = IPCErrorCode(rawValue: 11)
    /// Too many clients or sessions.
    public static let limitReached = IPCErrorCode(rawValue: 12)
    public static let expired = IPCErrorCode(rawValue: 13)

    /// The specification's name, or `CODE_n` for a code it does not define.
    public var description: String {
        switch rawValue {
        case 1: "BAD_REQUEST"
        case 2: "VERSION_UNSUPPORTED"
        case 3: "UNKNOWN_SESSION"
        case 4: "PERMISSION_DENIED"
        case 5: "SESSION_BUSY"
        case 6: "QUEUE_FULL"
        case 7: "PAYLOAD_TOO_LARGE"
        case 8: "SHUTTING_DOWN"
        case 9: "INTERNAL"
        case 10: "UPSTREAM_REJECTED"
        case 11: "SESSION_CLOSED"
        case 12: "LIMIT_REACHED"
        case 13: "EXPIRED"
        default: "CODE_\(rawValue)"
        }
    }
}
