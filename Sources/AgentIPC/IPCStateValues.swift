// The u8 values of LINK_STATE, SESSION_STATE and PRIORITY (`ipc.md` section 3).
//
// The two states travel from the daemon to clients, so they are structs that
// keep values this side does not know: an older client must not drop its
// connection because a newer daemon reports a new state. PRIORITY travels
// the other way and the daemon has to act on it, so it is a closed enum and
// the parser refuses any other value as a malformed request.

/// LINK_STATE: the daemon's one upstream link.
public struct LinkStateValue: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let disconnected = LinkStateValue(rawValue: 0)
    public static let connecting = LinkStateValue(rawValue: 1)
    public static let connected = LinkStateValue(rawValue: 2)
    public static let disconnecting = LinkStateValue(rawValue: 3)

    public var description: String {
        switch rawValue {
        case 0: "disconnected"
        case 1: "connecting"
        case 2: "connected"
        case 3: "disconnecting"
        default: "link state \(rawValue)"
        }
    }
}

/// SESSION_STATE: one logical session.
public struct SessionStateValue: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// No link yet: the session is opened upstream once the link is up.
    public static let pending = SessionStateValue(rawValue: 0)
    public static let open = SessionStateValue(rawValue: 1)
    /// Flow control: the server was told to stop sending (WINDOW 0).
    public static let paused = SessionStateValue(rawValue: 2)
    public static let failed = SessionStateValue(rawValue: 3)
    public static let closed = SessionStateValue(rawValue: 4)

    public var description: String {
        switch rawValue {
        case 0: "pending"
        case 1: "open"
        case 2: "paused"
        case 3: "failed"
        case 4: "closed"
        default: "session state \(rawValue)"
        }
    }
}

/// PRIORITY of a session: orders what the daemon writes to the link.
public enum IPCPriority: UInt8, Hashable, Sendable {
    case high = 0
    /// What a session gets when OPEN carries no PRIORITY.
    case normal = 1
    case low = 2
}
