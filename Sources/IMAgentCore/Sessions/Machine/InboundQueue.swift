import AgentStore
import NIOCore

/// One session's inbound messages, from the server's DATA until a client's ACK: the one
/// owner of their seqs, of the window that holds some of them in memory for the client,
/// and of the pause upstream. Every change goes through a method here, which keeps:
///
/// ```
/// clientAckedSeq ≤ handedOverSeq ≤ receivedSeq ≤ storingSeq
/// └ client ACKed ┘└ sent as MESSAGE ┘└ stored ┘└ being stored
/// ackedUpstreamSeq ≤ receivedSeq, handedOverSeq ≤ highestHandedOverSeq
/// storingSeq − receivedSeq = storing.count
/// window = handedOverSeq + 1, handedOverSeq + 2, … (each ≤ receivedSeq)
/// ```
///
/// and, for the bytes: `windowCost` is the cost of the window's entries, `storingBytes` the
/// payload being stored.
///
/// The store is the queue: `window` holds the messages after `handedOverSeq` that are in
/// memory, read from the store or kept as they were stored; the rest are read when the
/// client gets to them. The byte counts marked *budget* are changed by `MemoryBudget` only,
/// which these methods call with each message that comes into or leaves memory.
struct InboundQueue {
    typealias Message = (seq: UInt64, payload: ByteBuffer)

    /// Every new queue's window starts as this one shared storage; the first append copies
    /// it (copy on write), so an idle session costs no ring of its own.
    private static let emptyWindow = CircularBuffer<Message>(initialCapacity: 1)

    /// The seq of the last DATA handed to the store (the next DATA must be this + 1).
    private(set) var storingSeq: UInt64 = 0
    /// The seq of the last message durably stored (every one before it is too): RESUME_AFTER.
    private(set) var receivedSeq: UInt64 = 0
    /// The seq of the last ACK sent upstream on the current link.
    private(set) var ackedUpstreamSeq: UInt64 = 0
    /// The seq of the last message a client acknowledged (stored as delivered).
    private(set) var clientAckedSeq: UInt64 = 0
    /// The seq of the last message sent as MESSAGE to the attached client.
    private(set) var handedOverSeq: UInt64 = 0
    /// The highest seq ever sent as MESSAGE by this process (redeliveries are those below it).
    private(set) var highestHandedOverSeq: UInt64 = 0
    /// Messages `receivedSeq + 1 … storingSeq` being stored (see `OutboundQueue.storing`).
    private(set) var storing = StoringMessages(after: 0)
    /// The window: messages `handedOverSeq + 1 …` in seq order, at most up to `receivedSeq`.
    private(set) var window = InboundQueue.emptyWindow
    /// WINDOW 0 told the server to stop: the client fell behind.
    private(set) var pausedUpstream = false

    /// What `window` costs of the memory budget (`Session.windowCost`). *Budget.*
    var windowCost = 0
    /// The read of the store under way for the messages after the window, if any. *Budget.*
    var load: Session.Load?
    /// Payload bytes of `storing`. *Budget.*
    var storingBytes = 0

    init() {}

    /// The queue as the store kept it: the client's next MESSAGE is the one after its last ACK.
    init(received: UInt64, delivered: UInt64) {
        clientAckedSeq = delivered
        handedOverSeq = delivered
        receivedSeq = max(received, delivered)
        storingSeq = receivedSeq
        storing = StoringMessages(after: receivedSeq)
    }

    /// Messages stored and not acknowledged by a client.
    var count: Int { Int(receivedSeq - clientAckedSeq) }
    /// Messages being stored.
    var storingCount: Int { storing.count }
    /// What the window and the read under way hold of the memory budget.
    var memoryBytes: Int { windowCost + (load?.reserved ?? 0) }
    /// Whether stored messages are not yet handed to the client.
    var hasUndelivered: Bool { handedOverSeq < receivedSeq }
    /// The seq after which the window ends (the next read of the store starts after it).
    private var windowEnd: UInt64 { handedOverSeq + UInt64(window.count) }

    // MARK: Storing DATA

    /// DATA `seq` (the one after `storingSeq`) is handed to the store under `token`.
    mutating func receive(_ seq: UInt64, _ payload: ByteBuffer, token: UInt64, budget: inout MemoryBudget) {
        precondition(seq == storingSeq + 1, "DATA seq \(seq) stored after \(storingSeq)")
        storingSeq = seq
        storing.append(seq, .init(payload: payload, token: token))
        budget.beginStoringIn(payload.readableBytes, in: &self)
    }

    /// The token of `seq`'s store request while it is being stored.
    func storingToken(_ seq: UInt64) -> UInt64? { storing[seq]?.token }

    /// The store failed `seq`: it and every later one are forgotten (unacknowledged, the
    /// server sends them again from RESUME_AFTER on the next link).
    mutating func storeFailed(from seq: UInt64, budget: inout MemoryBudget) {
        let bytes = storing.removeFrom(seq).reduce(0) { $0 + $1.payload.readableBytes }
        budget.endStoringIn(bytes, in: &self)
        storingSeq = seq - 1
    }

    /// The store completed `seq`: each message stored without a gap before it is received, in
    /// seq order. The window keeps one for a client that `reads` (a blocked one counts: it
    /// drains soon, and the window bounds what waits) when it follows the window, no read
    /// runs, and the budget has room beside `outboundBytes`; otherwise it is read back from
    /// the store when the client gets to it. Returns how many were received.
    mutating func stored(_ seq: UInt64, reads: Bool, outboundBytes: Int, budget: inout MemoryBudget) -> Int {
        storing.markStored(seq)
        var received = 0
        while let next = storing.popStored() {
            receivedSeq += 1
            received += 1
            budget.endStoringIn(next.payload.readableBytes, in: &self)
            let cost = Session.windowCost(next.payload)
            if reads, load == nil, windowEnd + 1 == receivedSeq, budget.fits(cost, windowBytes: memoryBytes + outboundBytes) {
                window.append((receivedSeq, next.payload))
                budget.keepInbound(cost, in: &self)
            }
        }
        return received
    }

    // MARK: The client

    /// The next MESSAGEs for the client from the window: at most `limit`, and within
    /// `maxBytes` of payload (at least one). They leave the window; returns them and how
    /// many of them the client had been handed before (redeliveries).
    mutating func handOver(limit: Int, maxBytes: Int, budget: inout MemoryBudget) -> (batch: [Message], redelivered: Int) {
        var batch: [Message] = []
        var bytes = 0
        var cost = 0
        while batch.count < limit, let first = window.first, batch.isEmpty || bytes + first.payload.readableBytes <= maxBytes {
            window.removeFirst()
            batch.append(first)
            bytes += first.payload.readableBytes
            cost += Session.windowCost(first.payload)
        }
        budget.releaseInbound(cost, from: &self)
        let before = handedOverSeq
        handedOverSeq += UInt64(batch.count)
        let redelivered = Int(min(handedOverSeq, highestHandedOverSeq) - min(before, highestHandedOverSeq))
        highestHandedOverSeq = max(highestHandedOverSeq, handedOverSeq)
        return (batch, redelivered)
    }

    /// The client acknowledged everything up to `seq` (≤ `receivedSeq`, past `clientAckedSeq`).
    /// The window starts after `handedOverSeq`: only an ACK beyond it (of messages the
    /// client had from an earlier attach) reaches into it.
    mutating func clientAcknowledged(_ seq: UInt64, budget: inout MemoryBudget) {
        precondition(seq <= receivedSeq && seq > clientAckedSeq, "client ACK \(seq) outside \(clientAckedSeq)…\(receivedSeq)")
        while let first = window.first, first.seq <= seq {
            window.removeFirst()
            budget.releaseInbound(Session.windowCost(first.payload), from: &self)
        }
        clientAckedSeq = seq
        handedOverSeq = max(handedOverSeq, seq)
    }

    /// A client attaches: delivery starts again after what a client acknowledged, whatever
    /// was sent before, and the window is read again from the store.
    mutating func attach(budget: inout MemoryBudget) {
        handedOverSeq = clientAckedSeq
        dropWindow(budget: &budget)
    }

    /// Everything stored counts as delivered (DURABLE = 0 with no client attached): the
    /// window is dropped. Returns the seq now delivered.
    mutating func dropAll(budget: inout MemoryBudget) -> UInt64 {
        dropWindow(budget: &budget)
        clientAckedSeq = receivedSeq
        handedOverSeq = receivedSeq
        return receivedSeq
    }

    /// Forgets the window and the read under way; the messages stay in the store.
    mutating func dropWindow(budget: inout MemoryBudget) {
        budget.endRead(&load)
        budget.releaseInbound(windowCost, from: &self)
        window.removeAll()
    }

    // MARK: Reading the store

    /// Starts a read of the messages after the window when some are stored and the window
    /// holds fewer than `batch`, for up to `2 × batch` messages within `2 × batchBytes` and
    /// the budget's room beside `outboundBytes`. Returns the read's token, where it starts and
    /// the bytes it may bring; nil when none starts (the budget may have made the session wait).
    mutating func beginRead(session id: UInt64, batch: Int, batchBytes: Int, outboundBytes: Int, tokens: inout Tokens,
                            budget: inout MemoryBudget) -> (token: UInt64, after: UInt64, maxBytes: Int)? {
        guard load == nil, windowEnd < receivedSeq, window.count < batch else { return nil }
        let held = memoryBytes + outboundBytes
        let token = tokens.next()
        guard let reserved = budget.beginRead(&load, session: id, windowBytes: held, cap: 2 * batchBytes, token: token) else {
            return nil
        }
        return (token, windowEnd, reserved)
    }

    /// Whether `token` is the read under way.
    func isReading(_ token: UInt64) -> Bool { load?.token == token }

    /// The read under way is over; `messages` (nil when it failed) come into the window when
    /// they follow it. Returns whether the read stalled: the window is empty though stored
    /// messages wait, and the client did not acknowledge past what was read while it ran.
    mutating func endRead(_ messages: [InboundMessage]?, budget: inout MemoryBudget) -> Bool {
        budget.endRead(&load)
        guard let messages else { return false }
        for message in messages where message.seq == windowEnd + 1 {
            window.append((message.seq, message.payload))
            budget.keepInbound(Session.windowCost(message.payload), in: &self)
        }
        let overtaken = messages.last.map { $0.seq <= handedOverSeq } ?? false
        return window.isEmpty && hasUndelivered && !overtaken
    }

    // MARK: Upstream

    /// A link is established: the server resends from RESUME_AFTER + 1, which acknowledges
    /// everything up to it.
    mutating func linkEstablished() {
        ackedUpstreamSeq = receivedSeq
    }

    /// The ACK due upstream (the last stored seq, when not yet acknowledged on this link).
    mutating func takeDueAck() -> UInt64? {
        guard receivedSeq > ackedUpstreamSeq else { return nil }
        ackedUpstreamSeq = receivedSeq
        return receivedSeq
    }

    /// WINDOW 0 went (or goes) to the server; false when it was already paused.
    mutating func pause() -> Bool {
        guard !pausedUpstream else { return false }
        pausedUpstream = true
        return true
    }

    /// The server may send again; false when it was not paused.
    mutating func resume() -> Bool {
        guard pausedUpstream else { return false }
        pausedUpstream = false
        return true
    }
}
