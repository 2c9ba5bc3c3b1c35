import AgentStore
import NIOCore
import Testing

@testable import IMAgentCore

/// `InboundQueue` on its own, driven through sequences of events with the budget and the
/// tokens passed in; after every step its invariant must hold (`InboundQueue.audit`).
@Suite struct InboundQueueTests {
    func payload(_ bytes: Int) -> ByteBuffer { ByteBuffer(repeating: 3, count: bytes) }

    func expectSound(_ queue: InboundQueue, _ budget: MemoryBudget, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(queue.audit() == [], sourceLocation: sourceLocation)
        #expect(budget.held == queue.memoryBytes, "the budget holds what the queue's window and read hold", sourceLocation: sourceLocation)
        #expect(budget.storingIn == queue.storingBytes, sourceLocation: sourceLocation)
    }

    @Test func dataStoredOutOfOrder_isReceivedInSeqOrder_andKeptForAReadingClient() {
        var budget = MemoryBudget(limit: 1 << 20, uidStoringShare: 1 << 20)
        var queue = InboundQueue()
        for seq in 1...3 { queue.receive(UInt64(seq), payload(100), token: UInt64(seq), budget: &budget) }
        #expect(queue.storingSeq == 3 && queue.storingBytes == 300 && queue.storingToken(2) == 2)
        expectSound(queue, budget)
        #expect(queue.stored(3, reads: true, outboundBytes: 0, budget: &budget) == 0)
        #expect(queue.stored(1, reads: true, outboundBytes: 0, budget: &budget) == 1)
        #expect(queue.receivedSeq == 1 && queue.window.map(\.seq) == [1])
        expectSound(queue, budget)
        #expect(queue.stored(2, reads: true, outboundBytes: 0, budget: &budget) == 2)
        #expect(queue.receivedSeq == 3 && queue.window.map(\.seq) == [1, 2, 3] && queue.count == 3)
        expectSound(queue, budget)
        // The ACK upstream goes once per stored seq, and again only on a new link.
        #expect(queue.takeDueAck() == 3 && queue.takeDueAck() == nil)
        expectSound(queue, budget)
    }

    @Test func aFailedStore_forgetsItsSeqAndEveryLaterOne_soTheServerSendsThemAgain() {
        var budget = MemoryBudget(limit: 1 << 20, uidStoringShare: 1 << 20)
        var queue = InboundQueue()
        for seq in 1...4 { queue.receive(UInt64(seq), payload(10), token: UInt64(seq), budget: &budget) }
        _ = queue.stored(1, reads: false, outboundBytes: 0, budget: &budget)
        queue.storeFailed(from: 3, budget: &budget)
        #expect(queue.storingSeq == 2 && queue.receivedSeq == 1 && queue.storingBytes == 10 && queue.window.isEmpty)
        expectSound(queue, budget)
        queue.receive(3, payload(10), token: 9, budget: &budget)
        _ = queue.stored(2, reads: false, outboundBytes: 0, budget: &budget)
        _ = queue.stored(3, reads: false, outboundBytes: 0, budget: &budget)
        #expect(queue.receivedSeq == 3 && budget.storingIn == 0)
        expectSound(queue, budget)
    }

    @Test func batchesLeaveTheWindow_aReattachRedeliversFromTheClientsAck_andCountsRedeliveries() {
        var budget = MemoryBudget(limit: 1 << 20, uidStoringShare: 1 << 20)
        var tokens = Tokens()
        var queue = InboundQueue()
        for seq in 1...5 {
            queue.receive(UInt64(seq), payload(100), token: UInt64(seq), budget: &budget)
            _ = queue.stored(UInt64(seq), reads: true, outboundBytes: 0, budget: &budget)
        }
        let first = queue.handOver(limit: 2, maxBytes: 1 << 20, budget: &budget)
        #expect(first.batch.map(\.seq) == [1, 2] && first.redelivered == 0 && queue.handedOverSeq == 2)
        expectSound(queue, budget)
        let second = queue.handOver(limit: 10, maxBytes: 150, budget: &budget)  // at least one, then within the bytes
        #expect(second.batch.map(\.seq) == [3] && queue.window.map(\.seq) == [4, 5])
        queue.clientAcknowledged(2, budget: &budget)
        #expect(queue.clientAckedSeq == 2 && queue.count == 3)
        expectSound(queue, budget)
        // The client attaches again: MESSAGE starts after its ACK, read from the store.
        queue.attach(budget: &budget)
        #expect(queue.handedOverSeq == 2 && queue.window.isEmpty && budget.held == 0)
        let read = queue.beginRead(session: 1, batch: 64, batchBytes: 512 << 10, outboundBytes: 0, tokens: &tokens, budget: &budget)
        #expect(read?.after == 2 && queue.isReading(read!.token))
        expectSound(queue, budget)
        let stored = (3...5).map { InboundMessage(seq: $0, payload: payload(100)) }
        #expect(queue.endRead(stored, budget: &budget) == false)
        #expect(queue.window.map(\.seq) == [3, 4, 5])
        let again = queue.handOver(limit: 10, maxBytes: 1 << 20, budget: &budget)
        #expect(again.batch.map(\.seq) == [3, 4, 5] && again.redelivered == 1)  // seq 3 was handed over before
        expectSound(queue, budget)
        // An ACK of messages the client had before reaches into the window.
        queue.clientAcknowledged(5, budget: &budget)
        #expect(queue.count == 0 && !queue.hasUndelivered)
        expectSound(queue, budget)
    }

    @Test func aReadThatFindsNothing_stalls_unlessTheClientAcknowledgedPastIt() {
        var budget = MemoryBudget(limit: 1 << 20, uidStoringShare: 1 << 20)
        var tokens = Tokens()
        var queue = InboundQueue(received: 6, delivered: 2)
        #expect(queue.storingSeq == 6 && queue.handedOverSeq == 2 && queue.count == 4)
        expectSound(queue, budget)
        _ = queue.beginRead(session: 1, batch: 64, batchBytes: 512 << 10, outboundBytes: 0, tokens: &tokens, budget: &budget)
        #expect(queue.endRead([], budget: &budget) == true)
        _ = queue.beginRead(session: 1, batch: 64, batchBytes: 512 << 10, outboundBytes: 0, tokens: &tokens, budget: &budget)
        queue.clientAcknowledged(4, budget: &budget)
        let behind = (3...4).map { InboundMessage(seq: $0, payload: payload(1)) }
        #expect(queue.endRead(behind, budget: &budget) == false, "overtaken by the client's ACK: nothing is amiss")
        #expect(queue.window.isEmpty && queue.handedOverSeq == 4)
        #expect(queue.endRead(nil, budget: &budget) == false, "a failed read is the store's failure, not a stall")
        expectSound(queue, budget)
    }

    @Test func pauseAndResumeHappenOnce_andAnUnattendedQueueIsDroppedAsDelivered() {
        var budget = MemoryBudget(limit: 1 << 20, uidStoringShare: 1 << 20)
        var queue = InboundQueue()
        #expect(queue.pause() && !queue.pause() && queue.pausedUpstream)
        for seq in 1...3 {
            queue.receive(UInt64(seq), payload(50), token: UInt64(seq), budget: &budget)
            _ = queue.stored(UInt64(seq), reads: true, outboundBytes: 0, budget: &budget)
        }
        #expect(queue.dropAll(budget: &budget) == 3)
        #expect(queue.count == 0 && queue.window.isEmpty && queue.clientAckedSeq == 3 && budget.held == 0)
        #expect(queue.resume() && !queue.resume() && !queue.pausedUpstream)
        expectSound(queue, budget)
        queue.linkEstablished()
        #expect(queue.ackedUpstreamSeq == 3 && queue.takeDueAck() == nil)
    }

    @Test func pastTheBudget_storedMessagesStayInTheStore() {
        var budget = MemoryBudget(limit: 4 * 400, uidStoringShare: 1 << 20)  // a session's share: 400
        var queue = InboundQueue()
        for seq in 1...3 {
            queue.receive(UInt64(seq), payload(200), token: UInt64(seq), budget: &budget)
            _ = queue.stored(UInt64(seq), reads: true, outboundBytes: 0, budget: &budget)
        }
        #expect(queue.window.map(\.seq) == [1], "one fits (328 of 400); the next is read back when the client gets to it")
        expectSound(queue, budget)
        var other = InboundQueue()
        other.receive(1, payload(200), token: 4, budget: &budget)
        _ = other.stored(1, reads: true, outboundBytes: 300, budget: &budget)
        #expect(other.window.isEmpty, "the session's outbound window counts against the same share")
    }
}
