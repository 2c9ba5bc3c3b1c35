import Testing

@testable import IMAgentCore

/// `DeliveryHolds` and `OwedUpstream` on their own: what holds a client's MESSAGEs back,
/// and what the server is owed beside the sessions' queues.
@Suite struct DeliveryHoldsAndOwedUpstreamTests {
    @Test func aFullChannel_holdsItsClientsMessages_untilItDrains() {
        var holds = DeliveryHolds()
        #expect(holds.mayDeliver(1, to: 10))
        holds.setWritable(10, false)
        #expect(!holds.mayDeliver(1, to: 10))
        #expect(!holds.mayDeliver(2, to: 10))
        #expect(holds.mayDeliver(1, to: 11))  // another client of the same session's owner
        holds.setWritable(10, true)
        #expect(holds.mayDeliver(1, to: 10))
    }

    @Test func aWaitingAttach_holdsItsSession_untilItsAttachesAreTaken() {
        var holds = DeliveryHolds()
        holds.awaitStores(1, (client: 10, request: 5))
        holds.awaitStores(1, (client: 11, request: 6))
        #expect(holds.hasAttaches(1) && !holds.hasAttaches(2))
        #expect(!holds.mayDeliver(1, to: 10))
        #expect(holds.mayDeliver(2, to: 10))
        let taken = holds.takeAttaches(1)
        #expect(taken.map(\.client) == [10, 11] && taken.map(\.request) == [5, 6])
        let again = holds.takeAttaches(1)
        #expect(again.isEmpty)
        #expect(holds.mayDeliver(1, to: 10))
    }

    @Test func aClientGone_leavesNoHoldOfItsOwn_andKeepsOthersAttaches() {
        var holds = DeliveryHolds()
        holds.setWritable(10, false)
        holds.awaitStores(1, (client: 10, request: 5))
        holds.awaitStores(1, (client: 11, request: 6))
        holds.awaitStores(2, (client: 10, request: 7))
        holds.forget(client: 10)
        #expect(holds.mayDeliver(3, to: 10))
        #expect(!holds.hasAttaches(2))
        let kept = holds.takeAttaches(1)
        #expect(kept.map(\.client) == [11])
    }

    @Test func closesOwed_goUpOnce_inIdOrder() {
        var owed = OwedUpstream()
        owed.close(9)
        owed.close(3)
        owed.close(9)
        let closes = owed.takeCloses()
        let again = owed.takeCloses()
        #expect(closes == [3, 9] && again.isEmpty)
    }

    @Test func oneFlushIsScheduled_perTurnOfAcksOwed() {
        var owed = OwedUpstream()
        // The first ACK owed schedules the flush; the next ones of the turn do not.
        let scheduled = [owed.ack(4), owed.ack(2), owed.ack(4)]
        #expect(scheduled == [true, false, false])
        let flushed = owed.takeAcks()
        let again = owed.takeAcks()
        #expect(flushed == [2, 4] && again.isEmpty)
        let next = owed.ack(2)
        #expect(next)  // after a flush, the next ACK owed schedules another
    }
}
