import AgentIPC
import NIOCore

/// The one seam between the session layer and durable storage.
///
/// Every change is reported once it is durable (committed). The session router
/// acts on that completion only: ACCEPTED to a client follows `appendOutbound`,
/// ACK to the server follows `appendInbound`. Outcomes and futures complete on
/// the caller's event loop.
///
/// Contract the router relies on: operations on one session complete in the
/// order they were issued, and once an `appendOutbound` fails every later
/// `appendOutbound` of that session issued before the failure was reported
/// fails too (a group commit fails as a whole), so accepted seqs never have
/// holes.
protocol SessionPersistence: AnyObject {
    /// Every session with its counters and the size of its queues, for the router's
    /// start-up: never a message (those are read with `readOutbound`/`readInbound`).
    func load() -> EventLoopFuture<StoredSessions>
    /// Up to `limit` stored outbound messages after `seq`, in seq order, no more than
    /// `maxBytes` of payload (at least one message).
    func readOutbound(session: UInt64, after seq: UInt64, limit: Int, maxBytes: Int) -> EventLoopFuture<[StoredOutboundMessage]>
    /// The same for stored inbound messages.
    func readInbound(session: UInt64, after seq: UInt64, limit: Int, maxBytes: Int) -> EventLoopFuture<[(seq: UInt64, payload: ByteBuffer)]>
    /// Applies `operation`. Once it is durable (or failed), its outcome goes with `tag` to
    /// the receiver set by `deliverOutcomes(to:)`, on the loop: the SQLite store hands over
    /// every outcome of one group commit in one call, with no future per message.
    func submit(_ operation: PersistOperation, tag: UInt64)
    /// Where `submit`'s outcomes go; set once, before the first `submit`.
    func deliverOutcomes(to receiver: @escaping ([PersistOutcome]) -> Void)
    /// Gives up (as `PersistOperation.giveUpOutbound`) up to `limit` outbound messages after `seq` whose TTL
    /// passed by `nowMS`; returns them in seq order with the next deadline after `seq`.
    func giveUpExpiredOutbound(session: UInt64, after seq: UInt64, nowMS: Int64, limit: Int) -> EventLoopFuture<ExpiredOutboundBatch>
    /// How many of the first `count` outbound messages after `seq` are stored, the last one's seq, their bytes.
    func outboundSpan(session: UInt64, after seq: UInt64, count: Int) -> EventLoopFuture<StoredOutboxSpan>
}

/// One submitted operation's outcome, with the tag it was submitted with.
struct PersistOutcome {
    var tag: UInt64
    var result: Result<Void, SessionPersistenceError>
}

/// Why a persistence operation failed.
enum SessionPersistenceError: Error, Hashable, Sendable, CustomStringConvertible {
    /// No room (store or disk full): the sender gets QUEUE_FULL and retries later.
    case full
    /// Anything else; the operation did not happen.
    case failed(String)

    var description: String {
        switch self {
        case .full: "the store is full ([store] max_bytes, or the disk): retry once the server has acknowledged queued messages"
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

/// One queued outbound message's metadata, without its payload.
struct StoredOutboxEntry: Hashable, Sendable {
    var seq: UInt64
    var bytes: Int
    /// When its TTL passes (ms since the Unix epoch), or nil for never.
    var deadlineMS: Int64?
}

/// One stored outbound message read back for the window.
struct StoredOutboundMessage {
    var seq: UInt64
    var payload: ByteBuffer
    /// When its TTL passes (ms since the Unix epoch), or nil for never.
    var deadlineMS: Int64?
}

/// What `giveUpExpiredOutbound` gave up, and the next deadline it saw.
struct ExpiredOutboundBatch: Hashable, Sendable {
    var messages: [StoredOutboxEntry]
    var nextDeadlineMS: Int64?
}

/// The first messages of an outbox range: how many, the last one's seq, their bytes.
struct StoredOutboxSpan: Hashable, Sendable {
    var count: Int
    var lastSeq: UInt64
    var bytes: Int
}

/// One session as loaded at start-up: identity, counters and the size of what is still
/// queued — never one entry per message, so start-up memory does not grow with the queue.
struct StoredSession: Hashable, Sendable {
    var record: StoredSessionRecord
    var ackedSeq: UInt64
    var deliveredSeq: UInt64
    /// Outbound messages after `ackedSeq` still stored (those given up are not).
    var outboxCount: Int
    /// Their payload bytes.
    var outboxBytes: Int
    /// The earliest TTL deadline among them, or nil when none has one.
    var earliestDeadlineMS: Int64?
    /// The highest outbound seq ever accepted (equals `ackedSeq` when the outbox is empty).
    var sentSeq: UInt64
    /// The highest inbound seq ever stored (the inbox holds `deliveredSeq + 1 … receivedSeq`).
    var receivedSeq: UInt64
    /// Outbound messages given up so far.
    var givenUp: UInt64 = 0
}

extension StoredSession {
    /// A session whose outbox is described message by message (tests, the in-memory store).
    init(record: StoredSessionRecord, ackedSeq: UInt64, deliveredSeq: UInt64, outbox: [StoredOutboxEntry], sentSeq: UInt64,
         receivedSeq: UInt64, givenUp: UInt64 = 0) {
        self.init(record: record, ackedSeq: ackedSeq, deliveredSeq: deliveredSeq, outboxCount: outbox.count,
                  outboxBytes: outbox.reduce(0) { $0 + $1.bytes }, earliestDeadlineMS: outbox.compactMap(\.deadlineMS).min(),
                  sentSeq: sentSeq, receivedSeq: receivedSeq, givenUp: givenUp)
    }
}

/// What `load()` returns.
struct StoredSessions: Hashable, Sendable {
    var open: [StoredSession]
    /// Ids of closed sessions: never reused, and OPEN of one answers SESSION_CLOSED.
    var closed: Set<UInt64>
}
