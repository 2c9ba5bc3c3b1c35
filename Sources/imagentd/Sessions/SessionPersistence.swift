import AgentIPC
import NIOCore

/// The one seam between the session layer and durable storage.
///
/// Every operation returns a future that succeeds once the change is durable
/// (committed). The session router acts on that completion only: ACCEPTED to
/// a client follows `appendOutbound`, ACK to the server follows
/// `appendInbound`. Futures complete on the caller's event loop.
///
/// Contract the router relies on: operations on one session complete in the
/// order they were issued, and once an `appendOutbound` fails every later
/// `appendOutbound` of that session issued before the failure was reported
/// fails too (a group commit fails as a whole), so accepted seqs never have
/// holes.
protocol SessionPersistence: AnyObject {
    /// Everything stored, for the router's start-up.
    func load() -> EventLoopFuture<StoredSessions>
    func createSession(_ record: StoredSessionRecord) -> EventLoopFuture<Void>
    /// `expiresAtMS`: when its TTL passes (ms since the Unix epoch), kept for after a restart.
    func appendOutbound(session: UInt64, seq: UInt64, payload: ByteBuffer, expiresAtMS: Int64?) -> EventLoopFuture<Void>
    /// Outbound message `seq` never reached the server and never will (TTL, too large):
    /// forget it and count it in the session's `givenUp`.
    func giveUpOutbound(session: UInt64, seq: UInt64) -> EventLoopFuture<Void>
    /// The server holds every outbound message up to `seq`: they may be forgotten.
    func markAcked(session: UInt64, seq: UInt64) -> EventLoopFuture<Void>
    func appendInbound(session: UInt64, seq: UInt64, payload: ByteBuffer) -> EventLoopFuture<Void>
    /// A client acknowledged every inbound message up to `seq`: they may be forgotten.
    func markDelivered(session: UInt64, seq: UInt64) -> EventLoopFuture<Void>
    /// The session is over for good; its id stays reserved.
    func closeSession(_ session: UInt64) -> EventLoopFuture<Void>
}

/// Why a persistence operation failed.
enum SessionPersistenceError: Error, Hashable, Sendable, CustomStringConvertible {
    /// No room (store or disk full): the sender gets QUEUE_FULL and retries later.
    case full
    /// Anything else; the operation did not happen.
    case failed(String)

    var description: String {
        switch self {
        case .full: "the store is full"
        case .failed(let why): "the store failed: \(why)"
        }
    }
}

/// One session's identity as stored.
struct StoredSessionRecord: Hashable, Sendable {
    var id: UInt64
    var service: String
    var owner: UInt32
    var priority: IPCPriority
    var durable: Bool
}

/// One session as loaded at start-up: identity, counters and what is still queued.
struct StoredSession: Hashable, Sendable {
    var record: StoredSessionRecord
    var ackedSeq: UInt64
    var deliveredSeq: UInt64
    /// Outbound messages after `ackedSeq`, in seq order; the last one's seq is the session's sent seq.
    var outbox: [(seq: UInt64, payload: ByteBuffer)]
    /// Inbound messages after `deliveredSeq`, in seq order.
    var inbox: [(seq: UInt64, payload: ByteBuffer)]
    /// The highest outbound seq ever accepted (equals `ackedSeq` when the outbox is empty).
    var sentSeq: UInt64
    /// The highest inbound seq ever stored.
    var receivedSeq: UInt64
    /// TTL deadlines (ms since the Unix epoch) of outbox messages that have one, by seq.
    var outboxDeadlines: [UInt64: Int64] = [:]
    /// Outbound messages given up so far.
    var givenUp: UInt64 = 0

    static func == (lhs: StoredSession, rhs: StoredSession) -> Bool {
        lhs.record == rhs.record && lhs.ackedSeq == rhs.ackedSeq && lhs.deliveredSeq == rhs.deliveredSeq
            && lhs.sentSeq == rhs.sentSeq && lhs.receivedSeq == rhs.receivedSeq
            && lhs.outbox.map(\.seq) == rhs.outbox.map(\.seq) && lhs.outbox.map(\.payload) == rhs.outbox.map(\.payload)
            && lhs.inbox.map(\.seq) == rhs.inbox.map(\.seq) && lhs.inbox.map(\.payload) == rhs.inbox.map(\.payload)
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(record)
        hasher.combine(sentSeq)
        hasher.combine(receivedSeq)
    }
}

/// What `load()` returns.
struct StoredSessions: Hashable, Sendable {
    var open: [StoredSession]
    /// Ids of closed sessions: never reused, and OPEN of one answers SESSION_CLOSED.
    var closed: Set<UInt64>
}
