/// The ops of Agent IPC/1: requests (`ipc.md` section 4), their replies, and
/// the events the daemon sends on its own (section 5).
///
/// An enum, unlike tags and codes: a frame with an op outside this list
/// cannot be understood at all, and the specification answers it with
/// `ERROR BAD_REQUEST` and a closed connection.
public enum IPCOp: UInt16, Hashable, Sendable, CaseIterable, CustomStringConvertible {
    // Requests, client → daemon.
    case hello = 0x0001
    case open = 0x0002
    case close = 0x0003
    case detach = 0x0004
    case send = 0x0005
    case ack = 0x0006
    case status = 0x0010
    case sessions = 0x0011
    case metrics = 0x0012
    case watch = 0x0013
    case events = 0x0014
    case connect = 0x0020
    case disconnect = 0x0021
    case reconnect = 0x0022
    case reload = 0x0023
    case ping = 0x007F

    // Replies, daemon → client, with the request's id.
    case ok = 0x8000
    case welcome = 0x8001
    case opened = 0x8002
    case accepted = 0x8005
    case result = 0x8010
    case pong = 0x807F
    case error = 0xFFFF

    // Events, daemon → client, request 0.
    case message = 0x9001
    case acked = 0x9002
    case expired = 0x9003
    case sessionState = 0x9004
    case linkState = 0x9005
    case event = 0x9010

    /// Who sends an op, so a daemon can refuse a client's reply or event ops
    /// and a client can tell a reply from an event.
    public enum Direction: Hashable, Sendable {
        case request
        case reply
        case event
    }

    public var direction: Direction {
        switch self {
        case .hello, .open, .close, .detach, .send, .ack, .status, .sessions, .metrics, .watch, .events,
             .connect, .disconnect, .reconnect, .reload, .ping:
            .request
        case .ok, .welcome, .opened, .accepted, .result, .pong, .error:
            .reply
        case .message, .acked, .expired, .sessionState, .linkState, .event:
            .event
        }
    }

    /// The records the op defines, in the order of the specification's table:
    /// the order in which they are encoded. Any other tag in its frame is an
    /// extension.
    public var recordTags: [IPCTag] {
        switch self {
        case .hello: [.ipcVersion, .clientName]
        case .open: [.session, .service, .priority, .durable]
        case .close, .detach: [.session]
        case .send: [.session, .payload, .ttlMS]
        case .ack, .accepted, .acked: [.session, .seq]
        case .status, .sessions, .metrics, .watch, .events, .connect, .disconnect, .reconnect, .reload, .ping,
             .ok, .pong:
            []
        case .welcome: [.ipcVersion, .daemonVersion, .maxPayload, .linkState]
        case .opened: [.session, .sessionState, .sentSeq, .ackedSeq, .deliveredSeq]
        case .result, .event: [.json]
        case .error: [.code, .message]
        case .message: [.session, .seq, .payload]
        case .expired: [.session, .seq, .code, .message]
        case .sessionState: [.session, .sessionState, .code, .message]
        case .linkState: [.linkState]
        }
    }

    /// The specification's name.
    public var description: String {
        switch self {
        case .hello: "HELLO"
        case .open: "OPEN"
        case .close: "CLOSE"
        case .detach: "DETACH"
        case .send: "SEND"
        case .ack: "ACK"
        case .status: "STATUS"
        case .sessions: "SESSIONS"
        case .metrics: "METRICS"
        case .watch: "WATCH"
        case .events: "EVENTS"
        case .connect: "CONNECT"
        case .disconnect: "DISCONNECT"
        case .reconnect: "RECONNECT"
        case .reload: "RELOAD"
        case .ping: "PING"
        case .ok: "OK"
        case .welcome: "WELCOME"
        case .opened: "OPENED"
        case .accepted: "ACCEPTED"
        case .result: "RESULT"
        case .pong: "PONG"
        case .error: "ERROR"
        case .message: "MESSAGE"
        case .acked: "ACKED"
        case .expired: "EXPIRED"
        case .sessionState: "SESSION_STATE"
        case .linkState: "LINK_STATE"
        case .event: "EVENT"
        }
    }
}
