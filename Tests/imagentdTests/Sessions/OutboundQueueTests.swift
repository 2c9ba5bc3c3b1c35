import AgentStore
import NIOCore
import Testing

@testable import IMAgentCore

/// `OutboundQueue` on its own, driven through sequences of events with the budget and the
/// tokens passed in; after every step its invariant must hold (`OutboundQueue.audit`).
@Suite struct OutboundQueueTests {
    let t0 = MonotonicInstant.now
    let nowMS: Int64 = 1_700_000_000_000

    func payload(_ bytes: Int) -> ByteBuffer { ByteBuffer(repeating: 7, count: bytes) }

    func expectSound(_ queue: OutboundQueue, _ budget: MemoryBudget, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(queue.audit() == [], sourceLocation: sourceLocation)
        #expect(budget.held == queue.memoryBytes, "the budget holds what the queue's window and read hold", sourceLocation: sourceLocation)
    }

    /// Every message of `queue` written on the link: their wire seqs.
    func transmit(_ queue: inout OutboundQueue, _ budget: inout MemoryBudget, now: Int64? = nil, maxFrame: UInt32 = 1 << 20)
        -> (wire: [UInt64], expired: [UInt64], tooLarge: [UInt64]) {
        var writes: UInt64 = 0
        var result: (wire: [UInt64], expired: [UInt64], tooLarge: [UInt64]) = ([], [], [])
        queue.transmit(maxFrame: maxFrame, now: now ?? nowMS, at: t0, linkWrites: &writes, budget: &budget) {
            switch $0 {
            case .data(let wireSeq, _, _, _): result.wire.append(wireSeq)
            case .expired(let seq): result.expired.append(seq)
            case .tooLarge(let seq, _): result.tooLarge.append(seq)
            }
        }
        return result
    }

    @Test func sendsStoredOutOfOrder_areAcceptedInSeqOrder_andKeptInTheWindow() {
        var budget = MemoryBudget(limit: 1 << 20, uidStoringShare: 1 << 20)
        var queue = OutboundQueue()
        let seqs = (1...3).map { queue.assign(payload(100), client: 9, uid: 1000, token: UInt64($0), deadlineMS: nil, budget: &budget) }
        #expect(seqs == [1, 2, 3] && queue.isStoring && queue.storingBytes == 300 && queue.count == 3)
        expectSound(queue, budget)
        // The store completes seq 2 first: nothing is accepted before seq 1.
        #expect(queue.stored(2, acceptedAt: t0, mayKeep: true, inboundBytes: 0, budget: &budget).accepted == 0)
        #expect(queue.acceptedSeq == 0 && queue.storingBytes == 300)
        expectSound(queue, budget)
        #expect(queue.stored(1, acceptedAt: t0, mayKeep: true, inboundBytes: 0, budget: &budget).accepted == 2)
        #expect(queue.acceptedSeq == 2 && queue.window.map(\.seq) == [1, 2] && queue.loadedThroughSeq == 2 && queue.storingBytes == 100)
        expectSound(queue, budget)
        #expect(queue.stored(3, acceptedAt: t0, mayKeep: true, inboundBytes: 0, budget: &budget).accepted == 1)
        #expect(!queue.isStoring && queue.storedCount == 3 && queue.storedBytes == 300 && queue.count == 3)
        expectSound(queue, budget)
    }

    @Test func aFailedStore_givesBackItsSeqAndEveryLaterOne() {
        var budget = MemoryBudget(limit: 1 << 20, uidStoringShare: 1 << 20)
        var queue = OutboundQueue()
        for token in 1...4 { _ = queue.assign(payload(10), client: 9, uid: 1000, token: UInt64(token), deadlineMS: nil, budget: &budget) }
        _ = queue.stored(1, acceptedAt: t0, mayKeep: true, inboundBytes: 0, budget: &budget)
        queue.storeFailed(from: 3, budget: &budget)
        #expect(queue.assignedSeq == 2 && queue.acceptedSeq == 1 && queue.storingBytes == 10)
        #expect(queue.storingToken(2) == 2 && queue.storingToken(3) == nil)
        expectSound(queue, budget)
        // The next SEND takes seq 3 again.
        #expect(queue.assign(payload(10), client: 9, uid: 1000, token: 5, deadlineMS: nil, budget: &budget) == 3)
        _ = queue.stored(3, acceptedAt: t0, mayKeep: true, inboundBytes: 0, budget: &budget)
        _ = queue.stored(2, acceptedAt: t0, mayKeep: true, inboundBytes: 0, budget: &budget)
        #expect(queue.acceptedSeq == 3 && budget.storingOutByClient.isEmpty)
        expectSound(queue, budget)
    }

    @Test func theSendWindowBoundsWhatIsOnTheLink_andAcksMakeRoom() {
        var budget = MemoryBudget(limit: 1 << 20, uidStoringShare: 1 << 20)
        var queue = OutboundQueue()
        for token in 1...5 {
            let seq = queue.assign(payload(50), client: 9, uid: 1000, token: UInt64(token), deadlineMS: nil, budget: &budget)
            _ = queue.stored(seq, acceptedAt: t0, mayKeep: true, inboundBytes: 0, budget: &budget)
        }
        queue.opened(sendWindow: 2)
        #expect(transmit(&queue, &budget).wire == [1, 2])
        #expect(queue.transmittedCount == 2 && queue.transmittedBytes == 100 && queue.lastTransmittedWireSeq == 2)
        expectSound(queue, budget)
        var latencies = 0
        #expect(queue.acknowledge(throughWire: 1, beyondWindow: nil, budget: &budget) { _ in latencies += 1 } == 1)
        #expect(latencies == 1 && queue.serverAckedSeq == 1 && queue.transmittedCount == 1 && queue.storedCount == 4)
        expectSound(queue, budget)
        #expect(transmit(&queue, &budget).wire == [3])
        // The link goes: nothing is on the next one, and what the server may hold stays held.
        queue.resetLink()
        #expect(queue.transmittedCount == 0 && queue.transmittedBytes == 0 && queue.sendWindow == nil)
        expectSound(queue, budget)
        queue.opened(sendWindow: nil)
        #expect(transmit(&queue, &budget).wire == [2, 3, 4, 5])  // wire seqs from the last acknowledged
        #expect(queue.acknowledge(throughWire: 5, beyondWindow: nil, budget: &budget) { _ in } == 5)
        #expect(queue.count == 0 && queue.storedBytes == 0 && queue.window.isEmpty && budget.held == 0)
        #expect(queue.acknowledge(throughWire: 5, beyondWindow: nil, budget: &budget) { _ in } == nil)  // nothing new
        expectSound(queue, budget)
    }

    @Test func expiredAndTooLargeMessages_areGivenUpWithoutAGapOnTheWire_unlessTheServerMayHoldThem() {
        var budget = MemoryBudget(limit: 1 << 20, uidStoringShare: 1 << 20)
        var queue = OutboundQueue()
        let deadlines: [Int64?] = [nil, nowMS + 10, nil, nowMS + 10, nil]
        let sizes = [10, 10, 5_000, 10, 10]
        for (index, deadline) in deadlines.enumerated() {
            let seq = queue.assign(payload(sizes[index]), client: 9, uid: 1000, token: UInt64(index + 1), deadlineMS: deadline, budget: &budget)
            _ = queue.stored(seq, acceptedAt: t0, mayKeep: true, inboundBytes: 0, budget: &budget)
        }
        queue.opened(sendWindow: nil)
        // Seq 2 goes out before its TTL passes: the server may hold it from then on.
        queue.opened(sendWindow: 2)
        #expect(transmit(&queue, &budget).wire == [1, 2])
        queue.resetLink()
        queue.opened(sendWindow: nil)
        let later = transmit(&queue, &budget, now: nowMS + 20, maxFrame: 1_000)
        // Nothing follows a message given up on the link until the store has recorded it: a
        // restart that lost the record would number the wire without the gap.
        #expect(later.wire == [1, 2] && later.tooLarge == [3] && later.expired == [] && queue.givingUp == 1)
        #expect(transmit(&queue, &budget, now: nowMS + 20, maxFrame: 1_000).wire == [])
        queue.giveUpStored()
        let next = transmit(&queue, &budget, now: nowMS + 20, maxFrame: 1_000)
        #expect(next.wire == [] && next.expired == [4] && queue.givingUp == 1)
        queue.giveUpStored()
        #expect(transmit(&queue, &budget, now: nowMS + 20, maxFrame: 1_000).wire == [3])
        #expect(queue.givenUp == 2 && queue.window.map(\.seq) == [1, 2, 5] && queue.storedCount == 3 && queue.storedBytes == 30)
        expectSound(queue, budget)
        // Once an OPEN_OK says the server lacks seq 2, its TTL counts.
        queue.resetLink()
        queue.serverHoldsOnlyAcknowledged()
        var expired: [UInt64] = []
        let pass = queue.expireWindow(now: nowMS + 20, budget: &budget) { expired.append($0) }
        #expect(expired == [2] && pass.next == nil && !pass.hasTTL)
        #expect(queue.acknowledge(throughWire: 2, beyondWindow: nil, budget: &budget) { _ in } == 5)
        #expect(queue.count == 0 && queue.givenUp == 3 && queue.wireAckedSeq == 2)
        expectSound(queue, budget)
    }

    @Test func pastTheBudget_messagesStayInTheStore_andAreReadBackInSeqOrder() {
        var budget = MemoryBudget(limit: 4 * 400, uidStoringShare: 1 << 20)  // a session's share: 400
        var tokens = Tokens()
        var queue = OutboundQueue()
        for token in 1...6 {
            let seq = queue.assign(payload(200), client: 9, uid: 1000, token: UInt64(token), deadlineMS: nowMS + 1_000, budget: &budget)
            _ = queue.stored(seq, acceptedAt: t0, mayKeep: true, inboundBytes: 0, budget: &budget)
        }
        // One fits in the share (328 of 400); the rest are in the store only, and their TTL is known.
        #expect(queue.window.map(\.seq) == [1] && queue.storedCount == 6 && queue.hasMessagesAfterWindow)
        #expect(queue.storeDeadlineMS == nowMS + 1_000)
        expectSound(queue, budget)
        #expect(queue.beginRead(session: 1, inboundBytes: 0, tokens: &tokens, budget: &budget) == nil, "a message still to send in memory: reads wait for a quarter of the share")
        queue.opened(sendWindow: nil)
        #expect(transmit(&queue, &budget).wire == [1])
        _ = queue.acknowledge(throughWire: 1, beyondWindow: nil, budget: &budget) { _ in }
        let read = queue.beginRead(session: 1, inboundBytes: 0, tokens: &tokens, budget: &budget)
        #expect(read?.after == 1 && read?.maxBytes == 400)
        #expect(queue.beginRead(session: 1, inboundBytes: 0, tokens: &tokens, budget: &budget) == nil, "one read at a time")
        #expect(queue.beginStoreExpiry(now: nowMS + 2_000, tokens: &tokens) == nil, "no expiry while a read runs")
        expectSound(queue, budget)
        // A stale answer changes nothing; the read's own answer fills the window.
        #expect(!queue.isReading(99) && queue.isReading(read!.token))
        let stored = (2...3).map { OutboundMessage(seq: $0, payload: payload(200), expiresAtMS: nowMS + 1_000) }
        #expect(queue.endRead(stored, budget: &budget).added == 2)
        #expect(queue.window.map(\.seq) == [2, 3] && queue.loadedThroughSeq == 3 && queue.load == nil)
        expectSound(queue, budget)
        // Past the TTL, the store gives up what is after the window.
        let expiry = queue.beginStoreExpiry(now: nowMS + 2_000, tokens: &tokens)
        #expect(expiry?.after == 3 && queue.expiring == expiry?.token)
        queue.endStoreExpiry(ExpiredOutbound(messages: (4...6).map { OutboundIndexEntry(seq: $0, bytes: 200) }, nextExpiryMS: nil))
        #expect(queue.expiring == nil && queue.storedCount == 2 && queue.givenUp == 3 && !queue.hasMessagesAfterWindow)
        #expect(queue.storeDeadlineMS == nil)
        expectSound(queue, budget)
        // Dropping the window keeps the messages in the store, to be read again.
        queue.dropWindow(budget: &budget)
        #expect(queue.window.isEmpty && queue.loadedThroughSeq == 1 && queue.storedCount == 2 && budget.held == 0)
        expectSound(queue, budget)
    }

    @Test func afterARestart_anOpenOKBeyondTheWindowWaitsForTheStore_thenAcknowledgesTheSpan() {
        var budget = MemoryBudget(limit: 1 << 20, uidStoringShare: 1 << 20)
        var record = SessionRecord(id: 1, service: "s", ownerUID: 1000, priority: 1, durable: true, sentSeq: 10, ackedSeq: 4, createdMS: 0)
        record.givenUp = 2  // one below seq 4, one a hole above it
        var queue = OutboundQueue(restoring: IndexedSession(record: record, outboxCount: 5, outboxBytes: 500))
        #expect(queue.wireAckedSeq == 3 && queue.heldThroughSeq == 10 && queue.loadedThroughSeq == 4 && queue.window.isEmpty)
        expectSound(queue, budget)
        var tokens = Tokens()
        let read = queue.beginRead(session: 1, inboundBytes: 0, tokens: &tokens, budget: &budget)
        #expect(read != nil)
        // OPEN_OK: LAST_ACKED wire 6 covers 3 messages, none in memory: the read stops, the store is asked.
        let span = queue.locate(3, lastAcked: 6, window: nil, token: 50, budget: &budget)
        #expect(span.after == 4 && span.count == 3 && queue.load == nil && budget.held == 0)
        #expect(queue.located(token: 49) == nil && queue.locating != nil)
        #expect(queue.located(token: 50)?.lastAcked == 6 && queue.locating == nil)
        #expect(queue.acknowledge(throughWire: 6, beyondWindow: OutboundSpan(count: 3, lastSeq: 8, bytes: 300), budget: &budget) { _ in } == 8)
        #expect(queue.serverAckedSeq == 8 && queue.loadedThroughSeq == 8 && queue.storedCount == 2 && queue.storedBytes == 200)
        queue.serverHoldsOnlyAcknowledged()
        #expect(queue.heldThroughSeq == 8)
        expectSound(queue, budget)
    }
}
