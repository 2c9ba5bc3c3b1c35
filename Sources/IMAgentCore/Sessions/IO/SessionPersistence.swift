import AgentIPC
import AgentStore
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
    /// start-up: never a message (those are read with `.outbound`/`.inbound` operations).
    func load() -> EventLoopFuture<StoreIndex>
    /// Performs `operation`, a write or a read. Once a write is durable (or failed), or a
    /// read is done, its answer goes with `tag` to the receiver set by `deliverOutcomes(to:)`,
    /// on the loop: the SQLite store hands over every answer of one group commit in one
    /// call, with no future per message.
    func submit(_ operation: StoreOperation, tag: UInt64)
    /// Where `submit`'s answers go; set once, before the first `submit`.
    func deliverOutcomes(to receiver: @escaping ([PersistOutcome]) -> Void)
}

/// One submitted operation's answer, with the tag it was submitted with.
struct PersistOutcome {
    var tag: UInt64
    var result: Result<StoreResult, SessionPersistenceError>
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
