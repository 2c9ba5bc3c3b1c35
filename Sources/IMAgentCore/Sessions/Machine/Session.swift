import AgentIPC
import AgentStore
import IMLink
import NIOCore

/// One logical session's state: identity, ownership, both sequence spaces
/// and what is queued each way. A value, changed only by `SessionRouter`.
///
/// ```
/// outbound:  serverAckedSeq < (transmittedCount entries) ≤ acceptedSeq ≤ assignedSeq
///            └ server holds ┘└ on this link ┘└ stored ┘└ being stored
/// inbound:   clientAckedSeq ≤ handedOverSeq ≤ receivedSeq ≤ storingSeq
///            └ client ACKed ┘└ sent as MESSAGE ┘└ stored ┘└ being stored
/// ```
///
/// DATA on the wire carries *wire* seqs: the outbox in order without the
/// messages given up (TTL passed, too large for the server), so that the
/// server sees no gap. Until a message is given up, wire seq = IPC seq; the
/// outbox message at offset `i` has wire seq `wireAckedSeq + 1 + i`.
///
/// The store is the queue, and memory holds no entry per queued message: the
/// outbox is `outboxStored` messages after `serverAckedSeq` in the store, of which
/// `outboxWindow` holds the first ones with their payloads (on this link and not
/// acknowledged, then read-ahead: every stored seq ≤ `loadedThroughSeq`); the
/// rest are read in seq order when the window has room, and their TTLs are
/// found through the store's index (`storeDeadlineMS` is a lower bound of
/// them). `inbox` is the inbound window only: messages after `handedOverSeq`,
/// read from the store or kept as they were stored. `MemoryBudget` bounds both
/// windows, and it alone changes the byte counts below (marked *budget*).
struct Session {
    /// One outbound message of the window: stored, not yet acknowledged by the server.
    struct OutboundEntry {
        var seq: UInt64
        var payload: ByteBuffer
        /// When its TTL passes (ms since the Unix epoch), or nil for never.
        var deadlineMS: Int64?
        /// When ACCEPTED went to its client, for the send→ACK latency; nil when it
        /// was read back from the store (after a restart, or queued past the window).
        var acceptedAt: ContinuousClock.Instant? = nil
        /// When it was last written on a link, and its place among every DATA written
        /// (`PoisonWatch`); nil until it is.
        var writtenAt: ContinuousClock.Instant? = nil
        var writeOrder: UInt64 = 0
        var bytes: Int { payload.readableBytes }
    }

    /// An OPEN_OK whose LAST_ACKED reaches past the window (after a restart, nothing is read
    /// back yet): it takes effect once the store says which messages it covers.
    struct PendingOpenOK {
        var token: UInt64
        var lastAcked: UInt64
        var window: UInt32?
    }

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

    typealias Queue = CircularBuffer<(seq: UInt64, payload: ByteBuffer)>
    /// Every new session's outbox and inbox start as this one shared storage;
    /// the first append copies it (copy on write). `CircularBuffer()` would
    /// allocate room for 16 messages twice per session, most of what an idle
    /// session would cost.
    static let emptyQueue = Queue(initialCapacity: 1)
    /// The same for the outbound window, whose entries also carry a TTL.
    static let emptyOutbox = CircularBuffer<OutboundEntry>(initialCapacity: 1)

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

    // Outbound.
    /// The highest seq handed to persistence (the next SEND gets this + 1).
    var assignedSeq: UInt64 = 0
    /// The highest seq durably stored and ACCEPTED.
    var acceptedSeq: UInt64 = 0
    /// The highest seq the server acknowledged.
    var serverAckedSeq: UInt64 = 0
    /// The wire seq of the last message the server acknowledged (see above).
    var wireAckedSeq: UInt64 = 0
    /// Outbox entries, from the front, written on the current link; 0 after a link change.
    var transmittedCount = 0 {
        didSet { if transmittedCount == 0 { transmittedBytes = 0 } }
    }
    /// Payload bytes of those entries (bounded by `linkAheadBytes`).
    var transmittedBytes = 0
    /// Messages given up so far (persisted, to rebuild `wireAckedSeq` after a restart).
    var givenUp: UInt64 = 0
    /// Messages `serverAckedSeq + 1 … acceptedSeq` still stored (without those given up): the outbox's length.
    var outboxStored = 0
    /// The outbox's first messages with their payloads: every stored seq ≤ `loadedThroughSeq`.
    var outboxWindow = Session.emptyOutbox
    /// The window's end: the next read of the store starts after it.
    var loadedThroughSeq: UInt64 = 0
    /// Every seq up to this one may be held by the server (written on some link, or restored
    /// after a restart, and not denied by an OPEN_OK since): those must not be given up.
    var heldThroughSeq: UInt64 = 0
    /// The highest seq written on a link of this process: a DATA at or below it is a resend (metrics).
    var transmittedThroughSeq: UInt64 = 0
    /// What `outboxWindow` costs of the budget (`windowCost`). *Budget.*
    var loadedBytes = 0
    /// The outbox read from the store under way, if any (for messages after `loadedThroughSeq`). *Budget.*
    var outboundLoad: Load?
    /// No stored message after `loadedThroughSeq` has a TTL deadline before this; nil: none has one.
    var storeDeadlineMS: Int64?
    /// The token of the store's giving up of expired messages under way, if any.
    var expiring: UInt64?
    /// An OPEN_OK waiting for the store (see `PendingOpenOK`).
    var locating: PendingOpenOK?
    /// Payload bytes of the whole outbox, in memory or not (STATUS, byte limits).
    var outboxBytes = 0
    /// Messages `acceptedSeq + 1 … assignedSeq` being stored, with the token of
    /// their store request and whether it has completed (they become `acceptedSeq`
    /// in order only).
    var storingOut = StoringMessages(after: 0)
    /// DATA frames the server lets us have unacknowledged; nil without FLOW.
    var sendWindow: UInt32?

    // Inbound.
    /// The highest seq handed to persistence.
    var storingSeq: UInt64 = 0
    /// Messages `receivedSeq + 1 … storingSeq` being stored (see `storingOut`).
    var storingIn = StoringMessages(after: 0)
    /// The highest seq durably stored (RESUME_AFTER).
    var receivedSeq: UInt64 = 0
    /// The highest seq ACKed upstream on the current link.
    var ackedUpstreamSeq: UInt64 = 0
    /// The highest seq a client acknowledged.
    var clientAckedSeq: UInt64 = 0
    /// The highest seq sent as MESSAGE to the attached client.
    var handedOverSeq: UInt64 = 0
    /// The highest seq ever sent as MESSAGE by this process (redeliveries are those below it).
    var highestHandedOverSeq: UInt64 = 0
    /// The inbound window: messages `handedOverSeq + 1 …` in seq order (at most up to `receivedSeq`).
    var inbox = Session.emptyQueue
    /// What they cost of the budget (`windowCost`). *Budget.*
    var inboxWindowBytes = 0
    /// The inbox read from the store under way, if any (for the seqs after the window). *Budget.*
    var inboundLoad: Load?
    /// WINDOW 0 told the server to stop: the client fell behind.
    var pausedUpstream = false

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
        serverAckedSeq = record.ackedSeq
        acceptedSeq = max(record.sentSeq, record.ackedSeq)
        assignedSeq = acceptedSeq
        storingOut = StoringMessages(after: acceptedSeq)
        // Whatever was stored may have reached the server before the restart: only its
        // OPEN_OK (LAST_ACKED) says which did not, and only those may expire.
        // Payloads stay in the store: the window reads them when their turn comes.
        outboxStored = stored.outboxCount
        outboxBytes = stored.outboxBytes
        storeDeadlineMS = stored.outboxEarliestExpiryMS
        loadedThroughSeq = serverAckedSeq
        heldThroughSeq = acceptedSeq
        givenUp = record.givenUp
        // Given up above serverAckedSeq are the outbox's holes; the rest were below it.
        let holesAbove = (acceptedSeq - serverAckedSeq) - min(acceptedSeq - serverAckedSeq, UInt64(outboxStored))
        let givenUpBelow = givenUp - min(givenUp, holesAbove)
        wireAckedSeq = serverAckedSeq - min(serverAckedSeq, givenUpBelow)
        clientAckedSeq = record.deliveredSeq
        handedOverSeq = record.deliveredSeq
        receivedSeq = max(record.receivedSeq, record.deliveredSeq)
        storingSeq = receivedSeq
        storingIn = StoringMessages(after: receivedSeq)
    }

    /// The store's operation that creates this session, at `nowMS`.
    func createOperation(nowMS: Int64) -> StoreOperation {
        .createSession(id: id, service: service, ownerUID: owner, priority: priority.rawValue, durable: durable, createdAtMS: nowMS)
    }

    /// Outbound messages not yet acknowledged by the server, including those being stored.
    var outboxCount: Int { outboxStored + storingOut.count }

    /// `count` more MESSAGEs were handed to the client; returns how many of them it had been handed before.
    mutating func handOver(_ count: Int) -> Int {
        let before = handedOverSeq
        handedOverSeq += UInt64(count)
        defer { highestHandedOverSeq = max(highestHandedOverSeq, handedOverSeq) }
        return Int(min(handedOverSeq, highestHandedOverSeq) - min(before, highestHandedOverSeq))
    }
    /// Their payload bytes.
    var outboxTotalBytes: Int { outboxBytes + storingOutBytes }
    /// Payload bytes of the SENDs being stored. *Budget.*
    var storingOutBytes = 0
    /// Payload bytes of the DATA being stored. *Budget.*
    var storingInBytes = 0
    /// Bytes of this session's payloads in memory, the reads under way included (see `MemoryBudget`).
    var windowBytes: Int {
        loadedBytes + inboxWindowBytes + (outboundLoad?.reserved ?? 0) + (inboundLoad?.reserved ?? 0)
    }
    /// Inbound messages stored but not acknowledged by a client.
    var inboxCount: Int { Int(receivedSeq - clientAckedSeq) }

    var isFailed: Bool {
        if case .failed = upstream { return true }
        return false
    }

    /// OPENED's answer for this session.
    var opened: IPCMessage.Opened {
        IPCMessage.Opened(session: id, sessionState: state, sentSeq: acceptedSeq, ackedSeq: serverAckedSeq, deliveredSeq: clientAckedSeq)
    }

    /// OPEN for the server; with FLOW (`flow`) it announces the window the inbox allows.
    func openFrame(flow: Bool) -> Open {
        Open(session: id, service: service, resumeAfter: receivedSeq, window: flow ? (pausedUpstream ? 0 : Session.defaultWindow) : nil)
    }

    /// SESSION_STATE as a client sees it.
    var state: SessionStateValue {
        switch upstream {
        case .failed: .failed
        case .idle, .opening: .pending
        case .open: pausedUpstream ? .paused : .open
        }
    }
}
