/// One Agent IPC/1 frame as a typed value: the request id from its header and
/// the message its op and records make up. The layout is drawn on
/// `IPCFrameHeader`.
///
/// A reply carries the id of the request it answers; events, and the daemon's
/// answer to a frame it could not read far enough to learn an id, carry 0.
public struct IPCFrame: Hashable, Sendable {
    public var request: UInt32
    public var message: IPCMessage

    public init(request: UInt32, message: IPCMessage) {
        self.request = request
        self.message = message
    }

    /// An event: frames the daemon sends on its own always carry request 0.
    public static func event(_ message: IPCMessage) -> IPCFrame {
        IPCFrame(request: 0, message: message)
    }
}

/// Every op of Agent IPC/1 with its records (`ipc.md` sections 4 and 5).
///
/// Each payload keeps the records it does not know in `extensions`, so a
/// frame decodes and re-encodes byte for byte; on encoding those records come
/// first, then the known ones in the order of the specification's table
/// (`IPCOp.recordTags`).
public enum IPCMessage: Hashable, Sendable {
    // Requests.
    case hello(Hello)
    case open(Open)
    case close(SessionTarget)
    case detach(SessionTarget)
    case send(Send)
    /// Cumulative: every inbound message of the session up to `seq` is processed.
    case ack(SessionSeq)
    case status(NoRecords)
    case sessions(NoRecords)
    case metrics(NoRecords)
    /// Subscribes the connection to EVENT frames until it disconnects.
    case watch(NoRecords)
    /// The daemon's recent link and session events, as RESULT JSON.
    case events(NoRecords)
    case connect(NoRecords)
    /// The link stays down until CONNECT.
    case disconnect(NoRecords)
    case reconnect(NoRecords)
    /// Re-read the configuration.
    case reload(NoRecords)
    case ping(NoRecords)

    // Replies.
    case ok(NoRecords)
    case welcome(Welcome)
    case opened(Opened)
    /// The message is durably stored under `seq`.
    case accepted(SessionSeq)
    case result(JSONDocument)
    case pong(NoRecords)
    case error(ErrorReply)

    // Events.
    case message(InboundMessage)
    /// The server holds every outbound message of the session up to `seq`.
    case acked(SessionSeq)
    case expired(Expired)
    case sessionState(SessionStateChange)
    case linkState(LinkStateChange)
    /// To WATCH subscribers: a link, session or heartbeat change.
    case event(JSONDocument)

    public var op: IPCOp {
        switch self {
        case .hello: .hello
        case .open: .open
        case .close: .close
        case .detach: .detach
        case .send: .send
        case .ack: .ack
        case .status: .status
        case .sessions: .sessions
        case .metrics: .metrics
        case .watch: .watch
        case .events: .events
        case .connect: .connect
        case .disconnect: .disconnect
        case .reconnect: .reconnect
        case .reload: .reload
        case .ping: .ping
        case .ok: .ok
        case .welcome: .welcome
        case .opened: .opened
        case .accepted: .accepted
        case .result: .result
        case .pong: .pong
        case .error: .error
        case .message: .message
        case .acked: .acked
        case .expired: .expired
        case .sessionState: .sessionState
        case .linkState: .linkState
        case .event: .event
        }
    }
}
