import AgentIPC
import AgentStore
import NIOCore

/// One session's outbound messages, from a client's SEND until the server's ACK: the one
/// owner of their seqs, of the window that holds some of them in memory, and of what is on
/// the current link. Every change goes through a method here, which keeps:
///
/// ```
/// serverAckedSeq ≤ loadedThroughSeq ≤ acceptedSeq ≤ assignedSeq
/// └ server holds ┘└ window (in memory) ┘└ stored, after the window ┘└ being stored ┘
/// heldThroughSeq ≤ acceptedSeq, transmittedThroughSeq ≤ acceptedSeq
/// transmittedCount ≤ window.count ≤ storedCount ≤ acceptedSeq − serverAckedSeq
/// assignedSeq − acceptedSeq = storing.count
/// ```
///
/// and, for the bytes: `windowCost` is the cost of the window's entries, `transmittedBytes`
/// the payload of its first `transmittedCount` ones, `storingBytes` the payload being stored.
///
/// DATA on the wire carries *wire* seqs: the outbox in order without the messages given up
/// (TTL passed, too large for the server), so that the server sees no gap. Until a message
/// is given up, wire seq = IPC seq; the message at offset `i` of the window has wire seq
/// `wireAckedSeq + 1 + i`.
///
/// The store is the queue, and memory holds no entry per queued message: the outbox is
/// `storedCount` messages after `serverAckedSeq` in the store, of which `window` holds the
/// first ones with their payloads (on this link and not acknowledged, then read ahead);
/// the rest are read in seq order when the window has room, and their TTLs are found
/// through the store's index (`storeDeadlineMS` is a lower bound of them).
///
/// The byte counts marked *budget* are changed by `MemoryBudget` only, which these methods
/// call with each message that comes into or leaves the window or the store.
struct OutboundQueue {
    /// One outbound message of the window: stored, not yet acknowledged by the server.
    struct Entry {
        var seq: UInt64
        var payload: ByteBuffer
        /// The payload's CRC-32C when known (a large payload's, from its SEND or the store's read):
        /// its DATA frame's CRC follows from it without reading the payload again.
        var payloadCRC: UInt32? = nil
        /// When its TTL passes (ms since the Unix epoch), or nil for never.
        var deadlineMS: Int64?
        /// When ACCEPTED went to its client, for the send→ACK latency; nil when it
        /// was read back from the store (after a restart, or queued past the window).
        var acceptedAt: MonotonicInstant? = nil
        /// When it was last written on a link, and its place among every DATA written
        /// (`PoisonWatch`); nil until it is.
        var writtenAt: MonotonicInstant? = nil
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

    /// What `transmit` did with the next message of the window.
    enum Transmission {
        /// Written on the link as DATA `wireSeq`; `resent` when a link of this process had it before.
        case data(wireSeq: UInt64, payload: ByteBuffer, payloadCRC: UInt32?, resent: Bool)
        /// Given up: its TTL passed before it reached the server.
        case expired(seq: UInt64)
        /// Given up: `bytes` exceed the server's MAX_FRAME.
        case tooLarge(seq: UInt64, bytes: Int)
    }

    /// Every new queue's window starts as this one shared storage; the first append copies
    /// it (copy on write), so an idle session costs no ring of its own.
    private static let emptyWindow = CircularBuffer<Entry>(initialCapacity: 1)

    /// The seq of the last SEND handed to the store (the next SEND gets this + 1).
    private(set) var assignedSeq: UInt64 = 0
    /// The seq of the last message durably stored and ACCEPTED (every one before it is too).
    private(set) var acceptedSeq: UInt64 = 0
    /// The seq of the last message the server acknowledged (as recorded in the store).
    private(set) var serverAckedSeq: UInt64 = 0
    /// The wire seq of the last message the server acknowledged (see above).
    private(set) var wireAckedSeq: UInt64 = 0
    /// Every seq up to this one may be held by the server (written on some link, or restored
    /// after a restart, and not denied by an OPEN_OK since): those must not be given up.
    private(set) var heldThroughSeq: UInt64 = 0
    /// The highest seq written on a link of this process: a DATA at or below it is a resend (metrics).
    private(set) var transmittedThroughSeq: UInt64 = 0
    /// The seq of the window's end: every stored seq up to it is in the window, and the next
    /// read of the store starts after it.
    private(set) var loadedThroughSeq: UInt64 = 0

    /// Messages `serverAckedSeq + 1 … acceptedSeq` still stored (without those given up).
    private(set) var storedCount = 0
    /// Their payload bytes, in memory or not (STATUS, byte limits).
    private(set) var storedBytes = 0
    /// Messages given up so far (stored, to rebuild `wireAckedSeq` after a restart).
    private(set) var givenUp: UInt64 = 0
    /// Messages of the window given up that the store has not yet recorded as given up. Nothing
    /// goes on the link meanwhile: a restart that lost the record would number the wire without
    /// the gap, unlike the server, which would take the next message for one it already has.
    private(set) var givingUp = 0
    /// The first stored messages with their payloads: every stored seq ≤ `loadedThroughSeq`.
    private(set) var window = OutboundQueue.emptyWindow
    /// Window entries, from the front, written on the current link; 0 after a link change.
    private(set) var transmittedCount = 0
    /// Payload bytes of those entries (bounded by `Session.linkAheadBytes`).
    private(set) var transmittedBytes = 0
    /// DATA frames the server lets us have unacknowledged; nil without FLOW.
    private(set) var sendWindow: UInt32?
    /// No stored message after the window has a TTL deadline before this; nil: none has one.
    private(set) var storeDeadlineMS: Int64?
    /// The token of the store's giving up of expired messages after the window, while it runs.
    private(set) var expiring: UInt64?
    /// An OPEN_OK waiting for the store (see `PendingOpenOK`).
    private(set) var locating: PendingOpenOK?
    /// Messages `acceptedSeq + 1 … assignedSeq` being stored, with the token of their store
    /// request and whether it has completed (they become `acceptedSeq` in order only).
    private(set) var storing = StoringMessages(after: 0)

    /// What `window` costs of the memory budget (`Session.windowCost`). *Budget.*
    var windowCost = 0
    /// The read of the store under way for the messages after the window, if any. *Budget.*
    var load: Session.Load?
    /// Payload bytes of `storing`. *Budget.*
    var storingBytes = 0

    init() {}

    /// The queue as the store kept it. Whatever was stored may have reached the server
    /// before the restart: only its OPEN_OK (LAST_ACKED) says which did not, and only those
    /// may expire. Payloads stay in the store: the window reads them when their turn comes.
    init(restoring stored: IndexedSession) {
        let record = stored.record
        serverAckedSeq = record.ackedSeq
        acceptedSeq = max(record.sentSeq, record.ackedSeq)
        assignedSeq = acceptedSeq
        storing = StoringMessages(after: acceptedSeq)
        storedCount = stored.outboxCount
        storedBytes = stored.outboxBytes
        storeDeadlineMS = stored.outboxEarliestExpiryMS
        loadedThroughSeq = serverAckedSeq
        heldThroughSeq = acceptedSeq
        givenUp = record.givenUp
        // Given up above serverAckedSeq are the outbox's holes; the rest were below it.
        let holesAbove = (acceptedSeq - serverAckedSeq) - min(acceptedSeq - serverAckedSeq, UInt64(storedCount))
        let givenUpBelow = givenUp - min(givenUp, holesAbove)
        wireAckedSeq = serverAckedSeq - min(serverAckedSeq, givenUpBelow)
    }

    /// Messages not yet acknowledged by the server, those being stored included.
    var count: Int { storedCount + storing.count }
    /// Their payload bytes.
    var totalBytes: Int { storedBytes + storingBytes }
    /// Whether SENDs are being stored (they will be ACCEPTED).
    var isStoring: Bool { assignedSeq > acceptedSeq }
    /// The wire seq of the last DATA written on the current link.
    var lastTransmittedWireSeq: UInt64 { wireAckedSeq + UInt64(transmittedCount) }
    /// What the window and the read under way hold of the memory budget.
    var memoryBytes: Int { windowCost + (load?.reserved ?? 0) }
    /// Whether stored messages lie after the window (in the store only).
    var hasMessagesAfterWindow: Bool { window.count < storedCount }

    // MARK: Storing SENDs

    /// A SEND of `client` (of `uid`) takes the next seq and is handed to the store under `token`.
    mutating func assign(_ payload: ByteBuffer, payloadCRC: UInt32? = nil, client: UInt64, uid: UInt32, token: UInt64,
                         deadlineMS: Int64?, budget: inout MemoryBudget) -> UInt64 {
        assignedSeq += 1
        storing.append(assignedSeq, .init(payload: payload, payloadCRC: payloadCRC, client: client, token: token,
                                          deadlineMS: deadlineMS))
        budget.beginStoringOut(payload.readableBytes, client: client, uid: uid, in: &self)
        return assignedSeq
    }

    /// The token of `seq`'s store request while it is being stored.
    func storingToken(_ seq: UInt64) -> UInt64? { storing[seq]?.token }

    /// The store failed `seq`: it and every later one are given back (the store fails those too).
    mutating func storeFailed(from seq: UInt64, budget: inout MemoryBudget) {
        for entry in storing.removeFrom(seq) {
            budget.endStoringOut(entry.payload.readableBytes, client: entry.client, in: &self)
        }
        assignedSeq = seq - 1
    }

    /// The store completed `seq`: each message stored without a gap before it is accepted, in
    /// seq order. The window keeps one when everything before it is in memory too, nothing
    /// reads or gives up after the window, `mayKeep`, and the budget has room beside
    /// `inboundBytes` (the session's inbound share); otherwise it is read back from the store
    /// when its turn comes. Returns how many were accepted and the earliest TTL among them.
    mutating func stored(_ seq: UInt64, acceptedAt: MonotonicInstant, mayKeep: Bool, inboundBytes: Int,
                         budget: inout MemoryBudget) -> (accepted: Int, earliestDeadline: Int64?) {
        storing.markStored(seq)
        var accepted = 0
        var earliest: Int64?
        while let next = storing.popStored() {
            acceptedSeq += 1
            accepted += 1
            let bytes = next.payload.readableBytes
            budget.endStoringOut(bytes, client: next.client, in: &self)
            storedBytes += bytes
            let cost = Session.windowCost(next.payload)
            let keep = mayKeep && window.count == storedCount && load == nil && expiring == nil && locating == nil
                && budget.fits(cost, windowBytes: memoryBytes + inboundBytes)
            storedCount += 1
            if keep {
                window.append(Entry(seq: acceptedSeq, payload: next.payload, payloadCRC: next.payloadCRC,
                                    deadlineMS: next.deadlineMS, acceptedAt: acceptedAt))
                loadedThroughSeq = acceptedSeq
                budget.keepOutbound(cost, in: &self)
            } else if let deadline = next.deadlineMS {
                storeDeadlineMS = min(storeDeadlineMS ?? deadline, deadline)
            }
            if let deadline = next.deadlineMS { earliest = min(earliest ?? deadline, deadline) }
        }
        return (accepted, earliest)
    }

    // MARK: The link

    /// Writes what the send window allows after the entries already on this link, calling
    /// `body` with each. A message whose TTL passed (and that the server cannot hold), or too
    /// large for `maxFrame`, is given up instead: it was never on this link, and OPEN_OK said
    /// the server lacks it; the rest waits until the store has recorded that (`giveUpStored`).
    /// `linkWrites` counts every DATA written, for `PoisonWatch`.
    mutating func transmit(maxFrame: UInt32, now: Int64, at instant: MonotonicInstant, linkWrites: inout UInt64,
                           budget: inout MemoryBudget, _ body: (Transmission) -> Void) {
        while givingUp == 0, transmittedCount < window.count {
            if let sendWindow, transmittedCount >= Int(sendWindow) { break }
            // The ACKs of what is ahead on the link call this again.
            if transmittedCount > 0, transmittedBytes >= Session.linkAheadBytes { break }
            let index = window.index(window.startIndex, offsetBy: transmittedCount)
            let message = window[index]
            if message.seq > heldThroughSeq, let deadline = message.deadlineMS, deadline <= now {
                giveUp(at: transmittedCount, budget: &budget)
                body(.expired(seq: message.seq))
                continue
            }
            if message.bytes > Int(maxFrame) {
                giveUp(at: transmittedCount, budget: &budget)
                body(.tooLarge(seq: message.seq, bytes: message.bytes))
                continue
            }
            heldThroughSeq = max(heldThroughSeq, message.seq)
            let resent = message.seq <= transmittedThroughSeq
            if !resent { transmittedThroughSeq = message.seq }
            linkWrites += 1
            window[index].writtenAt = instant
            window[index].writeOrder = linkWrites
            transmittedCount += 1
            transmittedBytes += message.bytes
            body(.data(wireSeq: lastTransmittedWireSeq, payload: message.payload, payloadCRC: message.payloadCRC, resent: resent))
        }
    }

    /// The server acknowledged everything up to wire seq `wireSeq`: those leave the queue.
    /// What it covers after the window (only an OPEN_OK after a restart) comes as `span`.
    /// Calls `acknowledged` with the ACCEPTED time of each message that has one. Returns the
    /// new `serverAckedSeq`, or nil when nothing was covered.
    mutating func acknowledge(throughWire wireSeq: UInt64, beyondWindow span: OutboundSpan?, budget: inout MemoryBudget,
                              _ acknowledged: (MonotonicInstant) -> Void) -> UInt64? {
        guard wireSeq > wireAckedSeq else { return nil }
        let count = Int(min(wireSeq - wireAckedSeq, UInt64(window.count)))
        var seq = serverAckedSeq
        var bytes = 0
        var cost = 0
        for _ in 0..<count {
            let entry = window.removeFirst()
            if let accepted = entry.acceptedAt { acknowledged(accepted) }
            seq = entry.seq
            bytes += entry.bytes
            cost += Session.windowCost(entry.payload)
        }
        budget.releaseOutbound(cost, from: &self)
        let bytesInWindow = bytes
        var covered = count
        if let span, span.count > 0 {
            seq = span.lastSeq
            bytes += span.bytes
            covered += span.count
        }
        guard covered > 0 else { return nil }
        storedCount -= covered
        storedBytes -= bytes
        serverAckedSeq = seq
        loadedThroughSeq = max(loadedThroughSeq, seq)
        wireAckedSeq += UInt64(covered)
        transmittedBytes = max(0, transmittedBytes - bytesInWindow)
        transmittedCount = max(0, transmittedCount - count)
        if transmittedCount == 0 { transmittedBytes = 0 }
        return seq
    }

    /// The server announced its window (FLOW): at most this many DATA unacknowledged.
    mutating func serverAllows(_ window: UInt32?) {
        sendWindow = window
    }

    /// The session is open on a link again: nothing of it is on that link yet, and the
    /// server's OPEN_OK (or FLOW's default) says what it lets us send.
    mutating func opened(sendWindow: UInt32?) {
        transmittedCount = 0
        transmittedBytes = 0
        self.sendWindow = sendWindow
    }

    /// The server lacks everything after `serverAckedSeq` (its OPEN_OK said so): from now
    /// on their TTLs count.
    mutating func serverHoldsOnlyAcknowledged() {
        heldThroughSeq = serverAckedSeq
    }

    /// The link changed (came, went, or forgot the session): nothing is on it, and an
    /// OPEN_OK that waited for the store no longer counts.
    mutating func resetLink() {
        transmittedCount = 0
        transmittedBytes = 0
        locating = nil
        sendWindow = nil
    }

    /// An OPEN_OK whose LAST_ACKED covers `covered` messages, more than the window holds:
    /// the window stops reading, and the store is asked under `token` which messages after
    /// the window those are. Returns where the store looks and how many it counts.
    mutating func locate(_ covered: Int, lastAcked: UInt64, window announced: UInt32?, token: UInt64,
                         budget: inout MemoryBudget) -> (after: UInt64, count: Int) {
        budget.endRead(&load)
        locating = PendingOpenOK(token: token, lastAcked: lastAcked, window: announced)
        return (loadedThroughSeq, covered - window.count)
    }

    /// The store's answer under `token` to `locate`: the OPEN_OK that waited, or nil for a stale answer.
    mutating func located(token: UInt64) -> PendingOpenOK? {
        guard let pending = locating, pending.token == token else { return nil }
        locating = nil
        return pending
    }

    // MARK: Reading the store

    /// Starts a read of the messages after the window when there are some, nothing else
    /// reads or changes what is after the window, and the budget has room beside
    /// `inboundBytes`. With messages still to send in memory it waits until a quarter of the
    /// session's share is free, so that reads come in batches. Returns the read's token,
    /// where it starts and the bytes it may bring; nil when none starts (the budget may
    /// have made the session wait).
    mutating func beginRead(session id: UInt64, inboundBytes: Int, tokens: inout Tokens,
                            budget: inout MemoryBudget) -> (token: UInt64, after: UInt64, maxBytes: Int)? {
        guard load == nil, expiring == nil, hasMessagesAfterWindow else { return nil }
        let held = memoryBytes + inboundBytes
        let pendingInMemory = window.count - transmittedCount
        if pendingInMemory > 0, budget.room(windowBytes: held) < budget.sessionShare / 4 { return nil }
        let token = tokens.next()
        guard let reserved = budget.beginRead(&load, session: id, windowBytes: held, token: token) else {
            return nil
        }
        return (token, loadedThroughSeq, reserved)
    }

    /// Whether `token` is the read under way.
    func isReading(_ token: UInt64) -> Bool { load?.token == token }

    /// The read under way is over; `messages` (nil when it failed) come into the window when
    /// they are the outbox's next ones (nothing else changed the store after the window
    /// while it ran). Returns how many came in, and the earliest TTL among those the server
    /// cannot hold (the timer may have passed the store's lower bound of them while the read ran).
    mutating func endRead(_ messages: [OutboundMessage]?, budget: inout MemoryBudget) -> (added: Int, earliestDeadline: Int64?) {
        budget.endRead(&load)
        var added = 0
        var earliest: Int64?
        for message in messages ?? [] where message.seq > loadedThroughSeq && hasMessagesAfterWindow {
            window.append(Entry(seq: message.seq, payload: message.payload, payloadCRC: message.payloadCRC,
                                deadlineMS: message.expiresAtMS))
            loadedThroughSeq = message.seq
            budget.keepOutbound(Session.windowCost(message.payload), in: &self)
            added += 1
            if message.seq > heldThroughSeq, let deadline = message.expiresAtMS { earliest = min(earliest ?? deadline, deadline) }
        }
        return (added, earliest)
    }

    /// Forgets the window and the read under way; the messages stay in the store.
    mutating func dropWindow(budget: inout MemoryBudget) {
        budget.endRead(&load)
        budget.releaseOutbound(windowCost, from: &self)
        window.removeAll()
        loadedThroughSeq = serverAckedSeq
        locating = nil
        transmittedCount = 0
        transmittedBytes = 0
    }

    // MARK: TTL

    /// Gives up the window's messages after those on the current link (the server decides
    /// those) whose TTL passed and that the server cannot hold, calling `body` with each seq.
    /// Returns the next deadline of one that may still be given up, and whether any message
    /// in the window or after it has a TTL.
    mutating func expireWindow(now: Int64, budget: inout MemoryBudget, _ body: (UInt64) -> Void) -> (next: Int64?, hasTTL: Bool) {
        var next: Int64?
        var hasTTL = window.prefix(transmittedCount).contains { $0.deadlineMS != nil }
        var offset = transmittedCount
        while offset < window.count {
            let entry = window[window.index(window.startIndex, offsetBy: offset)]
            if let deadline = entry.deadlineMS {
                if entry.seq > heldThroughSeq, deadline <= now {
                    giveUp(at: offset, budget: &budget)
                    body(entry.seq)
                    continue
                }
                hasTTL = true
                if entry.seq > heldThroughSeq { next = min(next ?? deadline, deadline) }
            }
            offset += 1
        }
        return (next, hasTTL)
    }

    /// Starts the store's giving up of the expired messages after the window, when one may
    /// have expired and nothing else reads or changes what is after the window meanwhile.
    /// (Before a restart's first OPEN_OK the server may hold them all: nothing expires.)
    /// Returns its token and where the store looks.
    mutating func beginStoreExpiry(now: Int64, tokens: inout Tokens) -> (token: UInt64, after: UInt64)? {
        guard expiring == nil else { return nil }
        guard hasMessagesAfterWindow else {
            storeDeadlineMS = nil  // everything stored is in the window
            return nil
        }
        guard let deadline = storeDeadlineMS, deadline <= now, load == nil, locating == nil,
              heldThroughSeq <= loadedThroughSeq else { return nil }
        let token = tokens.next()
        expiring = token
        return (token, loadedThroughSeq)
    }

    /// The store's answer to `beginStoreExpiry`: the messages it gave up (each after the
    /// window, on no link) leave the queue; nil when it failed (nothing was given up).
    mutating func endStoreExpiry(_ batch: ExpiredOutbound?) {
        expiring = nil
        guard let batch else { return }
        for message in batch.messages {
            storedCount -= 1
            storedBytes -= message.bytes
            givenUp += 1
        }
        storeDeadlineMS = batch.nextExpiryMS
    }

    /// The store recorded (or failed to record) one message given up from the window: once
    /// every one is, the link may carry what follows them.
    mutating func giveUpStored() {
        givingUp = max(0, givingUp - 1)
    }

    /// Forgets the window's entry at `offset` (not on the current link, not held by the server).
    private mutating func giveUp(at offset: Int, budget: inout MemoryBudget) {
        givingUp += 1
        let entry = window.remove(at: window.index(window.startIndex, offsetBy: offset))
        givenUp += 1
        storedCount -= 1
        storedBytes -= entry.bytes
        budget.releaseOutbound(Session.windowCost(entry.payload), from: &self)
    }
}
