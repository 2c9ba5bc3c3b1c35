import AgentIPC
import AgentStore
import IMLink
import NIOCore

/// One logical session's state: identity, ownership, where it stands upstream, and what
/// is queued each way. A value, changed only by `SessionRouter`. Each direction's queue owns
/// its seqs, its window and their invariant: `outbound` (`OutboundQueue`) and `inbound`
/// (`InboundQueue`). `MemoryBudget` bounds both windows together.
struct Session {
    /// A read of the store under way for this session: its token (a stale answer is
    /// recognised by it) and the bytes of the budget it holds until it completes.
    struct Load: Hashable {
        var token: UInt64
        var reserved: Int
    }

    /// Where the session stands with the server on the current link.
    enum Upstream: Hashable {
        /// No link, or the link has not been told about it yet.
        case idle
        /// OPEN sent, OPEN_OK not yet received.
        case opening
        case open
        /// Refused (OPEN_FAIL other than SESSION_CLOSED, with the server's `code`; a service name
        /// imagentd refuses) or quarantined (`PoisonWatch`): nothing is sent upstream again.
        /// `message` is the whole sentence its owner reads (SESSION_STATE, SEND's error, SESSIONS).
        case failed(code: UInt16?, message: String)
    }

    /// What one message in a window costs beside its payload (its entry, the buffer's
    /// header, the allocator's rounding): counted against the memory budget, so that a
    /// window of small messages cannot hold several times the budget in bookkeeping.
    static let windowEntryOverhead = 128

    /// A message's share of the memory budget while it is in a window.
    static func windowCost(_ payload: ByteBuffer) -> Int { payload.readableBytes + windowEntryOverhead }

    /// The most payload bytes one session has written on the link and not yet seen
    /// acknowledged (at least one message). A backlog draining on some sessions then
    /// puts at most this much per session ahead of a live message on another one,
    /// instead of its whole window (1,024 frames of up to MAX_FRAME each).
    static let linkAheadBytes = 512 * 1024

    /// The window a sender starts with when none was announced (`wire.md` §5).
    static let defaultWindow: UInt32 = 1024

    let id: UInt64
    let service: String
    let owner: UInt32
    var priority: IPCPriority
    var durable: Bool
    /// The client connection this session is attached to.
    var attachedClient: UInt64?
    var upstream: Upstream = .idle
    /// Link losses its oldest unacknowledged message was in flight for.
    var poison = PoisonWatch()

    /// Outbound: its seqs, window and link state (see `OutboundQueue`).
    var outbound = OutboundQueue()

    /// Inbound: its seqs, window and pause upstream (see `InboundQueue`).
    var inbound = InboundQueue()

    init(id: UInt64, service: String, owner: UInt32, priority: IPCPriority, durable: Bool) {
        self.id = id
        self.service = service
        self.owner = owner
        self.priority = priority
        self.durable = durable
    }

    init(restoring stored: IndexedSession) {
        let record = stored.record
        self.init(id: record.id, service: record.service, owner: record.ownerUID,
                  priority: IPCPriority(rawValue: record.priority) ?? .normal, durable: record.durable)
        outbound = OutboundQueue(restoring: stored)
        inbound = InboundQueue(received: record.receivedSeq, delivered: record.deliveredSeq)
    }

    /// The store's operation that creates this session, at `nowMS`.
    func createOperation(nowMS: Int64) -> StoreOperation {
        .createSession(id: id, service: service, ownerUID: owner, priority: priority.rawValue, durable: durable, createdAtMS: nowMS)
    }

    /// Outbound messages not yet acknowledged by the server, including those being stored.
    var outboxCount: Int { outbound.count }
    /// Their payload bytes.
    var outboxTotalBytes: Int { outbound.totalBytes }
    /// Bytes of this session's payloads in memory, the reads under way included (see `MemoryBudget`).
    var windowBytes: Int { outbound.memoryBytes + inbound.memoryBytes }
    /// Inbound messages stored but not acknowledged by a client.
    var inboxCount: Int { inbound.count }

    var isFailed: Bool {
        if case .failed = upstream { return true }
        return false
    }

    /// OPENED's answer for this session.
    var opened: IPCMessage.Opened {
        IPCMessage.Opened(session: id, sessionState: state, sentSeq: outbound.acceptedSeq, ackedSeq: outbound.serverAckedSeq,
                          deliveredSeq: inbound.clientAckedSeq)
    }

    /// OPEN for the server; with FLOW (`flow`) it announces the window the inbox allows.
    func openFrame(flow: Bool) -> Open {
        Open(session: id, service: service, resumeAfter: inbound.receivedSeq,
             window: flow ? (inbound.pausedUpstream ? 0 : Session.defaultWindow) : nil)
    }

    /// SESSION_STATE as a client sees it.
    var state: SessionStateValue {
        switch upstream {
        case .failed: .failed
        case .idle, .opening: .pending
        case .open: inbound.pausedUpstream ? .paused : .open
        }
    }
}
