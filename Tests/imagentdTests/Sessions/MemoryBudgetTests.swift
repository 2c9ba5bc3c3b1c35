import AgentIPC
import NIOCore
import Testing

@testable import IMAgentCore

/// `MemoryBudget` on its own: what it admits, when it wakes waiters, when it stops and
/// resumes reading the link and the clients.
@Suite struct MemoryBudgetTests {
    func session(_ id: UInt64, owner: UInt32 = 1000) -> Session {
        Session(id: id, service: "s", owner: owner, priority: .normal, durable: true)
    }

    @Test func anEmptyBudgetAdmitsOneMessageOfAnySize_thenOnlyWithinTheSessionsShare() {
        var budget = MemoryBudget(limit: 4_000, uidStoringShare: 8_000)
        var a = session(1)
        #expect(budget.fits(1_000_000, a))
        budget.keepOutbound(900, in: &a.outbound)
        #expect(budget.held == 900 && a.outbound.windowCost == 900)
        #expect(budget.fits(100, a))  // the share is a quarter: 1,000
        #expect(!budget.fits(101, a))
        #expect(budget.room(for: a) == 100)
        #expect(budget.room(for: session(2)) == 1_000)
    }

    @Test func waitersWakeOnlyAfterARelease_andOnlyOnceAQuarterShareIsFree() {
        var budget = MemoryBudget(limit: 4_000, uidStoringShare: 8_000)
        var full = session(1)
        var others = (2...4).map { session($0) }
        budget.keepOutbound(1_000, in: &full.outbound)
        for index in others.indices { budget.keepInbound(1_000, in: &others[index].inbound) }
        var reader = session(7)
        let reserved = budget.beginRead(&reader.outbound.load, session: 7, windowBytes: reader.windowBytes, token: 1)
        #expect(reserved == nil)  // no room: it waits
        #expect(budget.settle().wake.isEmpty)  // nothing released
        budget.releaseInbound(100, from: &others[0].inbound)
        #expect(budget.settle().wake.isEmpty)  // 100 free: less than a quarter of a share (250)
        #expect(budget.waiters == [7])
        budget.releaseInbound(200, from: &others[0].inbound)
        #expect(budget.settle().wake == [7])
        #expect(budget.waiters.isEmpty)
        #expect(budget.settle().wake.isEmpty)  // woken once
    }

    @Test func aReadsReservationIsHeldUntilItEnds_andDroppingWindowsGivesEverythingBack() {
        var budget = MemoryBudget(limit: 4_000, uidStoringShare: 8_000)
        var a = session(1)
        let outbound = budget.beginRead(&a.outbound.load, session: 1, windowBytes: a.windowBytes, cap: 600, token: 1)
        let inbound = budget.beginRead(&a.inbound.load, session: 1, windowBytes: a.windowBytes, cap: 300, token: 2)
        #expect(outbound == 600 && inbound == 300)
        #expect(budget.held == 900 && a.windowBytes == 900)
        budget.endRead(&a.outbound.load)
        #expect(budget.held == 300 && a.outbound.load == nil)
        budget.keepOutbound(250, in: &a.outbound)
        a.releaseWindows(budget: &budget)
        #expect(budget.held == 0 && a.windowBytes == 0 && a.outbound.window.isEmpty && a.inbound.load == nil)
    }

    @Test func inboundBeingStored_pastTheBudgetStopsTheLink_untilHalfIsStored() {
        var budget = MemoryBudget(limit: 1_000, uidStoringShare: 8_000)
        var a = session(1)
        budget.beginStoringIn(1_000, in: &a.inbound)
        #expect(budget.settle().linkReading == nil)
        budget.beginStoringIn(1, in: &a.inbound)
        #expect(budget.settle().linkReading == false)
        budget.endStoringIn(400, in: &a.inbound)
        #expect(budget.settle().linkReading == nil)  // 601: more than half
        budget.endStoringIn(101, in: &a.inbound)
        #expect(budget.settle().linkReading == true)
        #expect(a.inbound.storingBytes == 500 && budget.storingIn == 500)
    }

    @Test func sendsBeingStored_pastTheUIDsShareStopReadingThatClient_only_untilHalfIsStored() {
        var budget = MemoryBudget(limit: 1_000, uidStoringShare: 2_000)
        var mine = session(1, owner: 1000)
        var theirs = session(2, owner: 1001)
        budget.beginStoringOut(1_500, client: 10, uid: 1000, in: &mine.outbound)
        budget.beginStoringOut(1_900, client: 20, uid: 1001, in: &theirs.outbound)
        #expect(budget.settle().clientReading.isEmpty)
        budget.beginStoringOut(600, client: 11, uid: 1000, in: &mine.outbound)  // a second client of the same uid
        #expect(budget.settle().clientReading.map(\.client) == [11])
        #expect(budget.pausedClients == [11: 1000])
        budget.endStoringOut(1_000, client: 10, in: &mine.outbound)
        #expect(budget.settle().clientReading.isEmpty)  // 1,100: more than half
        budget.endStoringOut(100, client: 10, in: &mine.outbound)
        let resumed = budget.settle().clientReading
        #expect(resumed.map(\.client) == [11] && resumed.map(\.reading) == [true])
        #expect(budget.storingOutByUID == [1000: 1_000, 1001: 1_900])
        #expect(mine.outbound.storingBytes == 1_000)
    }

    @Test func aClosedSessionsSendsInTheStore_areNoLongerCounted() {
        var budget = MemoryBudget(limit: 1_000, uidStoringShare: 2_000)
        var a = session(1)
        _ = a.outbound.assign(ByteBuffer(repeating: 1, count: 1_500), client: 10, uid: 1000, token: 1, deadlineMS: nil, budget: &budget)
        _ = a.outbound.assign(ByteBuffer(repeating: 1, count: 1_000), client: 10, uid: 1000, token: 2, deadlineMS: nil, budget: &budget)
        #expect(budget.settle().clientReading.map(\.reading) == [false])
        budget.forget(&a)
        #expect(budget.storingOutByClient.isEmpty && budget.storingOutByUID.isEmpty)
        #expect(budget.settle().clientReading.map(\.reading) == [true])
    }

    @Test func aDisconnectedClientIsForgotten_withoutAResume() {
        var budget = MemoryBudget(limit: 1_000, uidStoringShare: 100)
        var a = session(1)
        budget.beginStoringOut(500, client: 10, uid: 1000, in: &a.outbound)
        budget.forgetClient(10)
        #expect(budget.settle().clientReading.isEmpty)
        #expect(budget.pausedClients.isEmpty)
        budget.endStoringOut(500, client: 10, in: &a.outbound)  // the store finishes what it had
        #expect(budget.settle().clientReading.isEmpty && budget.storingOutByClient.isEmpty)
    }
}
