import AgentIPC
import AgentStore
import IMLink
import NIOCore

/// The limits the router enforces (`[limits]` of the configuration).
struct SessionLimits: Hashable, Sendable {
    var maxSessions = 10_000
    /// Open sessions one uid may hold (root: only `maxSessions`).
    var maxSessionsPerUID = 1_000
    var maxPayloadBytes = 1 << 20
    /// Outbound messages per session not yet acknowledged by the server.
    var outboxMessages = 10_000
    /// Inbound messages per session not yet acknowledged by a client; at this
    /// depth the session is paused upstream (WINDOW 0).
    var inboxMessages = 10_000
    /// Outbound payload bytes per session not yet acknowledged by the server.
    var outboxBytes = 1 << 30
    /// Outbound payload bytes of all the sessions of one uid.
    var uidOutboxBytes = 4 << 30
    /// MESSAGE frames handed to a client at once; the next batch follows only
    /// while the client's channel stays writable.
    var deliveryBatch = 64
    /// Bytes of payload per batch (at least one message goes): the IPC
    /// connection gives up on a client whose queue passes 8 MiB, so a batch
    /// must stay well below that whatever the message size.
    var deliveryBatchBytes = 512 << 10
    /// Payload bytes held in memory by all sessions together ([store] memory_budget_bytes):
    /// outbound messages on the link and read ahead, inbound messages read ahead for
    /// clients. Everything else queued stays in the store only.
    var memoryBudgetBytes = 8 << 20
    /// Outbound messages read from the store at once, at most.
    var readBatch = 256
    /// Expired outbound messages the store gives up at once, at most (then the next batch).
    var expiryBatch = 1_024

    /// SENDs being stored that the clients of one uid may hold in memory: past it, their
    /// sockets are not read until half is stored (at least two of the largest messages).
    var uidStoringBytes: Int { max(memoryBudgetBytes, 2 * maxPayloadBytes) }
}

/// The established link, as far as sessions care.
struct LinkInfo: Hashable, Sendable {
    /// WINDOW frames were negotiated.
    var flow: Bool
    /// The largest DATA body the server accepts (HELLO_OK MAX_FRAME); a larger message is given up.
    var maxFrame: UInt32 = FrameHeader.maxNegotiableBody
    /// OPEN_OK's LAST_ACKED counts what the server acknowledged before this daemon started (IMLink).
    /// An MQTT broker keeps no such count: after a restart it answers 0, which is no loss.
    var serverKeepsAcknowledged = true
}

/// Who is asking: from the kernel's peer credentials, never from the client.
struct SessionClient: Hashable, Sendable {
    var id: UInt64
    var uid: UInt32
    var isAdmin: Bool
}

/// Every session, and the rules of `wire.md` §5 and `ipc.md` §6 between
/// local clients, the store and the link. A pure value: each event returns
/// the actions to perform; `SessionService` performs them and feeds back
/// their results (persistence completions, client writability).
///
/// Exactly-once rests on three orderings kept here: ACCEPTED only after the
/// outbound message is stored, ACK upstream only after the inbound message is
/// stored, MESSAGE in seq order from `clientAckedSeq + 1` on every attach.
///
/// Its whole surface is `SessionRouter+Events.swift`: every event ends there in
/// `settle`, which performs what the memory budget says (wake-ups, reading the link
/// and the clients), so no handler has to remember it. The handlers live one file
/// per seam: client requests, link, persistence completions, windows, outbound,
/// expiry, inbound and shared rules (`SessionRouter+*.swift`). Its state is internal only
/// so those files reach it; nothing else changes it.
struct SessionRouter<Random: RandomNumberGenerator> {
    /// Every session, and the indexes kept by it (see `SessionTable`).
    var table = SessionTable()
    /// What holds MESSAGEs back from clients beside the windows (full channels, waiting attaches).
    var holds = DeliveryHolds()
    var link: LinkInfo?
    /// The CLOSEs and ACKs the server is owed beside the sessions' queues.
    var owed = OwedUpstream()
    /// Whether the last `activity` action said a client holds a session.
    var reportedActive = false
    var tokens = Tokens()
    /// Which sessions hold messages with a TTL, and when the TTL timer fires.
    var expiry = ExpirySchedule()
    /// Every payload byte in memory, and who may take more (the windows, what is being stored).
    var budget: MemoryBudget
    /// The time of the event being handled: each event of `SessionRouter+Events.swift` brings it.
    var now: SessionTime
    /// What happened since the daemon started.
    var totals = SessionTotals()
    /// The limits of `[limits]`. A reload changes only those that apply at once; the memory
    /// budget's, set once at start (`budget`), apply only at the next start (`ReloadPlan`).
    var limits: SessionLimits
    var random: Random

    init(limits: SessionLimits, random: Random, now: SessionTime) {
        self.limits = limits
        self.now = now
        self.random = random
        budget = MemoryBudget(limit: limits.memoryBudgetBytes, uidStoringShare: limits.uidStoringBytes)
    }

    // MARK: Start-up

    /// The stored sessions, before any client or link event. Returns a warning for each
    /// session stored with a service name `ServiceName` refuses (created before the rule):
    /// it is failed, so it never reaches the link, and its owner can read and close it.
    @discardableResult
    mutating func restore(_ stored: StoreIndex) -> [String] {
        // A failed session keeps its queues in the store (its owner may still read them) but
        // is never opened upstream again: to the router it is closed.
        table.restoreClosed(stored.sessions.lazy.filter { $0.record.state != .open }.map(\.record.id))
        var warnings: [String] = []
        for session in stored.sessions where session.record.state == .open {
            var restored = Session(restoring: session)
            if let refusal = ServiceName.refusal(restored.service) {
                let text = "\(refusal); the session is never sent upstream: close it and open one with a valid name"
                restored.upstream = .failed(code: nil, message: text)
                warnings.append("session \(restored.id) of uid \(restored.owner) failed at start-up: \(text)")
            }
            table.restore(restored)
            if restored.outbound.storeDeadlineMS != nil { expiry.track(restored.id) }
        }
        return warnings
    }

    // MARK: Counters for STATUS

    var outboxTotal: Int { table.all.reduce(0) { $0 + $1.outboxCount } }
    var inboxTotal: Int { table.all.reduce(0) { $0 + $1.inboxCount } }
    /// Payload bytes queued outbound (stored or being stored), all sessions.
    var outboxBytesTotal: Int { table.all.reduce(0) { $0 + $1.outboxTotalBytes } }
}

extension SessionLimits {
    /// The `[limits]` table of the configuration.
    init(_ limits: DaemonConfiguration.Limits) {
        self.init(maxSessions: limits.maxSessions, maxSessionsPerUID: limits.maxSessionsPerUID, maxPayloadBytes: limits.maxPayloadBytes,
                  outboxMessages: limits.outboxMessages, inboxMessages: limits.inboxMessages,
                  outboxBytes: limits.outboxBytes, uidOutboxBytes: limits.uidOutboxBytes)
    }

    /// `[limits]` and the memory budget of `[store]`.
    init(_ configuration: DaemonConfiguration) {
        self.init(configuration.limits)
        memoryBudgetBytes = configuration.store.memoryBudgetBytes
    }
}
