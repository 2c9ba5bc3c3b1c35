import NIOCore

/// One IMLink/1 frame as a typed value (`wire.md` section 3).
///
/// Control frames keep the records they do not know in `extensions`, so a
/// frame decodes and re-encodes byte for byte; on encoding those records come
/// first, then the known ones in the order of the specification's table.
public enum Frame: Hashable, Sendable {
    case hello(Hello)
    case helloOK(HelloOK)
    case login(Login)
    case loginOK(LoginOK)
    case loginFail(LoginFail)
    case ping(Ping)
    case pong(Ping)
    case goaway(Goaway)
    case error(ErrorFrame)
    case open(Open)
    case openOK(OpenOK)
    case openFail(OpenFail)
    case close(Close)
    case data(DataFrame)
    case ack(Ack)
    case window(WindowUpdate)

    public var type: FrameType {
        switch self {
        case .hello: .hello
        case .helloOK: .helloOK
        case .login: .login
        case .loginOK: .loginOK
        case .loginFail: .loginFail
        case .ping: .ping
        case .pong: .pong
        case .goaway: .goaway
        case .error: .error
        case .open: .open
        case .openOK: .openOK
        case .openFail: .openFail
        case .close: .close
        case .data: .data
        case .ack: .ack
        case .window: .window
        }
    }

    /// The header's `session` field: 0 for link frames.
    public var session: UInt64 {
        switch self {
        case .hello, .helloOK, .login, .loginOK, .loginFail, .ping, .pong, .goaway: 0
        case .error(let f): f.session
        case .open(let f): f.session
        case .openOK(let f): f.session
        case .openFail(let f): f.session
        case .close(let f): f.session
        case .data(let f): f.session
        case .ack(let f): f.session
        case .window(let f): f.session
        }
    }
}

/// HELLO: the agent's opening offer.
public struct Hello: Hashable, Sendable {
    public var versionMin: UInt8
    public var versionMax: UInt8
    public var features: Features
    /// 1–128 bytes of UTF-8.
    public var agentID: String
    public var agentVersion: String?
    /// The largest body the agent accepts.
    public var maxFrame: UInt32
    public var extensions: [TLVRecord] = []

    public init(versionMin: UInt8 = 1, versionMax: UInt8 = 1, features: Features, agentID: String,
                agentVersion: String? = nil, maxFrame: UInt32, extensions: [TLVRecord] = []) {
        self.versionMin = versionMin
        self.versionMax = versionMax
        self.features = features
        self.agentID = agentID
        self.agentVersion = agentVersion
        self.maxFrame = maxFrame
        self.extensions = extensions
    }
}

/// HELLO_OK: the server's choice of version and features.
public struct HelloOK: Hashable, Sendable {
    public var version: UInt8
    public var features: Features
    public var maxFrame: UInt32
    public var extensions: [TLVRecord] = []

    public init(version: UInt8 = 1, features: Features, maxFrame: UInt32, extensions: [TLVRecord] = []) {
        self.version = version
        self.features = features
        self.maxFrame = maxFrame
        self.extensions = extensions
    }
}

public struct Login: Hashable, Sendable {
    public var token: ByteBuffer
    public var agentID: String
    public var extensions: [TLVRecord] = []

    public init(token: ByteBuffer, agentID: String, extensions: [TLVRecord] = []) {
        self.token = token
        self.agentID = agentID
        self.extensions = extensions
    }
}

public struct LoginOK: Hashable, Sendable {
    public var heartbeatMS: UInt32?
    public var serverTimeMS: UInt64?
    public var extensions: [TLVRecord] = []

    public init(heartbeatMS: UInt32? = nil, serverTimeMS: UInt64? = nil, extensions: [TLVRecord] = []) {
        self.heartbeatMS = heartbeatMS
        self.serverTimeMS = serverTimeMS
        self.extensions = extensions
    }
}

public struct LoginFail: Hashable, Sendable {
    public var code: WireCode
    public var message: String?
    public var retryAfterMS: UInt32?
    public var extensions: [TLVRecord] = []

    public init(code: WireCode, message: String? = nil, retryAfterMS: UInt32? = nil, extensions: [TLVRecord] = []) {
        self.code = code
        self.message = message
        self.retryAfterMS = retryAfterMS
        self.extensions = extensions
    }
}

/// PING and PONG: `id` travels in the header's seq field.
public struct Ping: Hashable, Sendable {
    public var id: UInt64
    public var timestampUS: UInt64
    public var extensions: [TLVRecord] = []

    public init(id: UInt64, timestampUS: UInt64, extensions: [TLVRecord] = []) {
        self.id = id
        self.timestampUS = timestampUS
        self.extensions = extensions
    }
}

public struct Goaway: Hashable, Sendable {
    public var code: WireCode
    public var message: String?
    public var retryAfterMS: UInt32?
    /// `host:port`, an IPv6 literal in brackets.
    public var redirect: String?
    public var extensions: [TLVRecord] = []

    public init(code: WireCode, message: String? = nil, retryAfterMS: UInt32? = nil, redirect: String? = nil,
                extensions: [TLVRecord] = []) {
        self.code = code
        self.message = message
        self.retryAfterMS = retryAfterMS
        self.redirect = redirect
        self.extensions = extensions
    }
}

/// ERROR: fatal for the link when `session` is 0, about one session otherwise.
public struct ErrorFrame: Hashable, Sendable {
    public var session: UInt64
    public var code: WireCode
    public var message: String?
    public var extensions: [TLVRecord] = []

    public init(session: UInt64 = 0, code: WireCode, message: String? = nil, extensions: [TLVRecord] = []) {
        self.session = session
        self.code = code
        self.message = message
        self.extensions = extensions
    }
}

public struct Open: Hashable, Sendable {
    public var session: UInt64
    /// 1–255 bytes of UTF-8.
    public var service: String
    /// The highest inbound seq the agent holds durably.
    public var resumeAfter: UInt64
    /// The server→agent window; absent means the default (1024).
    public var window: UInt32?
    public var extensions: [TLVRecord] = []

    public init(session: UInt64, service: String, resumeAfter: UInt64, window: UInt32? = nil, extensions: [TLVRecord] = []) {
        self.session = session
        self.service = service
        self.resumeAfter = resumeAfter
        self.window = window
        self.extensions = extensions
    }
}

public struct OpenOK: Hashable, Sendable {
    public var session: UInt64
    /// The highest outbound seq the server holds durably.
    public var lastAcked: UInt64
    /// The agent→server window; absent means the default (1024).
    public var window: UInt32?
    public var extensions: [TLVRecord] = []

    public init(session: UInt64, lastAcked: UInt64, window: UInt32? = nil, extensions: [TLVRecord] = []) {
        self.session = session
        self.lastAcked = lastAcked
        self.window = window
        self.extensions = extensions
    }
}

public struct OpenFail: Hashable, Sendable {
    public var session: UInt64
    public var code: WireCode
    public var message: String?
    public var extensions: [TLVRecord] = []

    public init(session: UInt64, code: WireCode, message: String? = nil, extensions: [TLVRecord] = []) {
        self.session = session
        self.code = code
        self.message = message
        self.extensions = extensions
    }
}

public struct Close: Hashable, Sendable {
    public var session: UInt64
    public var code: WireCode?
    public var extensions: [TLVRecord] = []

    public init(session: UInt64, code: WireCode? = nil, extensions: [TLVRecord] = []) {
        self.session = session
        self.code = code
        self.extensions = extensions
    }
}

/// DATA: an opaque payload. When `compressed` is set the body is raw DEFLATE
/// exactly as it travels; `Deflate.inflate` turns it into the payload.
public struct DataFrame: Hashable, Sendable {
    public var session: UInt64
    public var seq: UInt64
    public var compressed: Bool
    public var body: ByteBuffer {
        didSet { bodyCRC = nil }
    }
    /// The CRC-32C of `body` when it is known already (a large payload's, computed once on its
    /// way through the daemon), so that the frame's CRC need not read the body again. Not part
    /// of the frame's value; a new `body` forgets it.
    public private(set) var bodyCRC: UInt32?

    /// Bodies of this many bytes or more keep their CRC when a frame is parsed, and are worth
    /// giving one when a frame is made: below, reading the body twice costs less than combining.
    public static let bodyCRCKeptFrom = 16 * 1024

    public init(session: UInt64, seq: UInt64, compressed: Bool = false, body: ByteBuffer, bodyCRC: UInt32? = nil) {
        self.session = session
        self.seq = seq
        self.compressed = compressed
        self.body = body
        self.bodyCRC = bodyCRC
    }

    public static func == (lhs: DataFrame, rhs: DataFrame) -> Bool {
        lhs.session == rhs.session && lhs.seq == rhs.seq && lhs.compressed == rhs.compressed && lhs.body == rhs.body
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(session)
        hasher.combine(seq)
        hasher.combine(compressed)
        hasher.combine(body)
    }
}

/// ACK: every DATA up to `seq` in that direction is durably stored.
public struct Ack: Hashable, Sendable {
    public var session: UInt64
    public var seq: UInt64
    public var extensions: [TLVRecord] = []

    public init(session: UInt64, seq: UInt64, extensions: [TLVRecord] = []) {
        self.session = session
        self.seq = seq
        self.extensions = extensions
    }
}

/// WINDOW: replaces the sender's window for one session and direction.
public struct WindowUpdate: Hashable, Sendable {
    public var session: UInt64
    public var window: UInt32
    public var extensions: [TLVRecord] = []

    public init(session: UInt64, window: UInt32, extensions: [TLVRecord] = []) {
        self.session = session
        self.window = window
        self.extensions = extensions
    }
}
