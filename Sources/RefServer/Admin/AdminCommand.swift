import IMLink
import NIOCore

/// A fault knob or query, as typed on stdin or the admin socket (one per
/// line) or passed to `RefServer.execute(_:)` directly.
public enum AdminCommand: Hashable, Sendable {
    public enum PushTarget: Hashable, Sendable {
        /// Every session with this id, whichever agent holds it.
        case session(UInt64)
        /// Every session open on a connection now.
        case all
    }

    /// Send GOAWAY to every connection, then close them after a short grace.
    case goaway(code: WireCode, retryAfterMS: UInt32?, redirect: String?)
    /// The next `count` LOGINs fail with `code`.
    case failLogin(code: WireCode, retryAfterMS: UInt32?, count: Int)
    /// Close every connection now.
    case drop
    /// Close each current connection once it has received `frames` more frames.
    case dropAfter(frames: Int)
    /// Close any connection, without handling it, whenever DATA of this session arrives (a
    /// message the server cannot take); nil switches it off.
    case dropOnData(session: UInt64?)
    /// Stop (true) or resume (false) reading from every socket.
    case stall(Bool)
    /// Black-hole connections idle both ways for this long; nil switches it off.
    case natTimeout(TimeAmount?)
    /// HEARTBEAT_MS for future LOGIN_OKs.
    case heartbeat(ms: UInt32)
    /// What future LOGIN_OKs say HEARTBEAT_MS is (0 allowed), the idle check unchanged; nil: the real value.
    case advertiseHeartbeat(ms: UInt32?)
    /// Start a stream of `count` messages of `size` bytes at `rate` per second (0: at once).
    case push(PushTarget, count: Int, size: Int, rate: Int)
    /// One line of JSON with counters and every session's sequence numbers.
    case stats
    case help

    /// The command reference, shared by `help` and the executable's `--help`.
    public static let reference = """
        goaway [CODE] [RETRY_MS] [[REDIRECT] host:port]
            send GOAWAY (default code SHUTDOWN) to every connection,
            then close them after a short grace
        fail-login CODE [RETRY_MS] [COUNT]
            the next COUNT (default 1) LOGINs get LOGIN_FAIL with CODE
        drop
            close every connection now
        drop-after N
            close each current connection after it has received N more frames
        drop-on-data SESSION|off
            close any connection, without handling the frame, whenever DATA
            of session SESSION arrives on it, until off
        stall on|off
            stop reading from every socket, new ones too / resume reading
        nat-timeout SECONDS|off
            a connection silent both ways that long becomes a black hole:
            what it sends is discarded, nothing is sent to it, and its socket
            is closed silently a minute later
        heartbeat MS
            HEARTBEAT_MS for future LOGIN_OKs
        advertise-heartbeat MS|off
            future LOGIN_OKs say HEARTBEAT_MS is MS (0 allowed: a broken
            server) while idle connections are still judged by heartbeat
        push SESSION|all COUNT SIZE RATE
            send COUNT messages of SIZE bytes at RATE a second (0: at once)
            on every agent's session with that id, or on every open session
        stats
            one line of JSON: connections, logins, sessions, frames and
            messages in and out, every session's sequence numbers
        help
            the list of commands
        CODE is a number or a name: PROTOCOL, VERSION_UNSUPPORTED,
        TOKEN_INVALID, TOKEN_EXPIRED, FORBIDDEN, OVERLOADED, UNKNOWN_SESSION,
        SESSION_CLOSED, SHUTDOWN, FRAME_TOO_LARGE.
        Every command answers one line: "ok ..." or "error ...".
        """

    /// Parses one command line.
    public static func parse(_ line: String) throws(AdminCommandError) -> AdminCommand {
        let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        guard let name = words.first?.lowercased() else { throw AdminCommandError("empty command; try \"help\"") }
        var arguments = Array(words.dropFirst())
        switch name {
        case "goaway":
            var redirect: String?
            if let index = arguments.firstIndex(where: { $0.lowercased() == "redirect" }) {
                guard index + 1 < arguments.count else { throw AdminCommandError("redirect needs host:port") }
                redirect = arguments[index + 1]
                arguments.removeSubrange(index...(index + 1))
            } else if let index = arguments.firstIndex(where: { $0.contains(":") }) {
                redirect = arguments.remove(at: index)
            }
            try expect(arguments, count: 0...2, usage: "goaway [CODE] [RETRY_MS] [[REDIRECT] host:port]")
            return .goaway(code: try arguments.first.map { text throws(AdminCommandError) in try code(text) } ?? .shutdown,
                           retryAfterMS: try optionalNumber(arguments.dropFirst().first, "RETRY_MS"),
                           redirect: redirect)
        case "fail-login":
            try expect(arguments, count: 1...3, usage: "fail-login CODE [RETRY_MS] [COUNT]")
            return .failLogin(code: try code(arguments[0]),
                              retryAfterMS: try optionalNumber(arguments.dropFirst().first, "RETRY_MS"),
                              count: try optionalNumber(arguments.dropFirst(2).first, "COUNT") ?? 1)
        case "drop":
            try expect(arguments, count: 0...0, usage: "drop")
            return .drop
        case "drop-after":
            try expect(arguments, count: 1...1, usage: "drop-after N")
            let frames: Int = try number(arguments[0], "N")
            guard frames > 0 else { throw AdminCommandError("drop-after needs N ≥ 1") }
            return .dropAfter(frames: frames)
        case "drop-on-data":
            try expect(arguments, count: 1...1, usage: "drop-on-data SESSION|off")
            if arguments[0].lowercased() == "off" { return .dropOnData(session: nil) }
            return .dropOnData(session: try number(arguments[0], "SESSION"))
        case "stall":
            try expect(arguments, count: 1...1, usage: "stall on|off")
            return .stall(try onOff(arguments[0]))
        case "nat-timeout":
            try expect(arguments, count: 1...1, usage: "nat-timeout SECONDS|off")
            if arguments[0].lowercased() == "off" { return .natTimeout(nil) }
            guard let seconds = Double(arguments[0]), seconds > 0, seconds < 86_400 else {
                throw AdminCommandError("nat-timeout needs seconds (above 0, below a day) or off, not \"\(arguments[0])\"")
            }
            return .natTimeout(.nanoseconds(Int64(seconds * 1e9)))
        case "heartbeat":
            try expect(arguments, count: 1...1, usage: "heartbeat MS")
            let ms: UInt32 = try number(arguments[0], "MS")
            guard ms > 0 else { throw AdminCommandError("heartbeat needs MS ≥ 1") }
            return .heartbeat(ms: ms)
        case "advertise-heartbeat":
            try expect(arguments, count: 1...1, usage: "advertise-heartbeat MS|off")
            if arguments[0].lowercased() == "off" { return .advertiseHeartbeat(ms: nil) }
            return .advertiseHeartbeat(ms: try number(arguments[0], "MS"))
        case "push":
            try expect(arguments, count: 4...4, usage: "push SESSION|all COUNT SIZE RATE")
            let target: PushTarget = arguments[0].lowercased() == "all" ? .all : .session(try number(arguments[0], "SESSION"))
            return .push(target, count: try number(arguments[1], "COUNT"), size: try number(arguments[2], "SIZE"),
                         rate: try number(arguments[3], "RATE"))
        case "stats":
            try expect(arguments, count: 0...0, usage: "stats")
            return .stats
        case "help":
            return .help
        default:
            throw AdminCommandError("unknown command \"\(name)\"; try \"help\"")
        }
    }

    private static func expect(_ arguments: [String], count: ClosedRange<Int>, usage: String) throws(AdminCommandError) {
        guard count.contains(arguments.count) else { throw AdminCommandError("usage: \(usage)") }
    }

    private static func number<N: FixedWidthInteger>(_ text: String, _ name: String) throws(AdminCommandError) -> N {
        guard let value = N(text), value >= 0 else {
            throw AdminCommandError("\(name) must be a whole number from 0 to \(N.max), not \"\(text)\"")
        }
        return value
    }

    private static func optionalNumber<N: FixedWidthInteger>(_ text: String?, _ name: String) throws(AdminCommandError) -> N? {
        guard let text else { return nil }
        return try number(text, name)
    }

    private static func onOff(_ text: String) throws(AdminCommandError) -> Bool {
        switch text.lowercased() {
        case "on": return true
        case "off": return false
        default: throw AdminCommandError("expected on or off, not \"\(text)\"")
        }
    }

    private static func code(_ text: String) throws(AdminCommandError) -> WireCode {
        if let raw = UInt16(text) { return WireCode(rawValue: raw) }
        let wanted = text.uppercased()
        for raw in UInt16(1)...10 where WireCode(rawValue: raw).description == wanted {
            return WireCode(rawValue: raw)
        }
        throw AdminCommandError("unknown code \"\(text)\"; use a number or a name such as SHUTDOWN")
    }
}

/// A command line that could not be parsed; `message` says why.
public struct AdminCommandError: Error, Hashable, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
