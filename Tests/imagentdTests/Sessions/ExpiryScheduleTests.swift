import AgentIPC
import IMLink
import IMAgentTestKit
import NIOCore
import Testing

@testable import IMAgentCore

/// `ExpirySchedule` on its own, its invariant checked after every step (`ExpirySchedule.audit`),
/// and the router's use of it: the timer is asked for only when it must move, closed sessions
/// leave the schedule, and a full batch of the store's expiry leaves the timer set for the next.
@Suite struct ExpiryScheduleTests {
    @Test func theTimerOnlyMovesEarlier_untilItFires() {
        var schedule = ExpirySchedule()
        var asked: [Int64] = []
        func wake(_ deadline: Int64) -> Int64? {
            asked.append(deadline)
            defer { #expect(schedule.audit(askedSinceFired: asked) == []) }
            return schedule.wake(at: deadline)
        }
        #expect(schedule.timer == nil)
        #expect(wake(2_000) == 2_000)
        #expect(wake(3_000) == nil)  // the timer set for 2,000 comes first
        #expect(wake(2_000) == nil)
        #expect(wake(1_500) == 1_500)
        schedule.track(7)
        schedule.track(3)
        #expect(schedule.fire() == [3, 7])
        asked = []
        #expect(schedule.timer == nil && schedule.audit(askedSinceFired: asked) == [])
        #expect(wake(3_000) == 3_000)  // after firing, any deadline sets it
    }

    @Test func sessionsStayTracked_untilForgotten() {
        var schedule = ExpirySchedule()
        schedule.track(1)
        schedule.track(1)
        schedule.track(2)
        #expect(schedule.tracks(1) && schedule.tracks(2) && !schedule.tracks(3))
        schedule.forget(1)
        schedule.forget(3)
        #expect(schedule.sessions == [2])
        #expect(schedule.fire() == [2])
        #expect(schedule.sessions == [2])  // firing looks at them; only a look that finds no TTL forgets one
    }

    /// Random sequences of every step, against a model of what was asked: the timer is always
    /// the earliest deadline asked since it last fired, and the sessions those tracked and not forgotten.
    @Test func theInvariantHoldsAfterEveryStep_ofRandomSequences() {
        for seed in UInt64(0)..<200 {
            var random = SplitMix64(seed: seed)
            var schedule = ExpirySchedule()
            var asked: [Int64] = []
            var tracked: Set<UInt64> = []
            for step in 0..<200 {
                let session = random.next() % 8
                switch random.next() % 4 {
                case 0:
                    schedule.track(session)
                    tracked.insert(session)
                case 1:
                    let deadline = Int64(random.next() % 10_000)
                    let earlier = asked.min().map { deadline < $0 } ?? true
                    let set = schedule.wake(at: deadline)
                    asked.append(deadline)
                    #expect(set == (earlier ? deadline : nil), "seed \(seed) step \(step)")
                case 2:
                    #expect(schedule.fire() == tracked.sorted(), "seed \(seed) step \(step)")
                    asked = []
                default:
                    schedule.forget(session)
                    tracked.remove(session)
                }
                #expect(schedule.audit(askedSinceFired: asked) == [], "seed \(seed) step \(step)")
                #expect(schedule.sessions == tracked, "seed \(seed) step \(step)")
            }
        }
    }

    // MARK: The router's use

    private func send(_ router: inout TestRouter, _ id: UInt64, _ text: String, ttl: UInt32?, disk: StoredPayloads? = nil) -> [SessionAction] {
        let send = IPCMessage.Send(session: id, payload: bytes(text), ttlMS: ttl)
        if let disk { return router.completing(router.clientSend(alice, request: 9, send), disk: disk) }
        return router.completing(router.clientSend(alice, request: 9, send))
    }

    @Test func theRouterAsksForTheTimer_onlyWhenItMustFireEarlier() {
        var router = makeRouter()
        router.now.wallMS = 1_000
        let id = router.newSession()
        #expect(send(&router, id, "a", ttl: 500).expiryTimers == [1_500])
        #expect(send(&router, id, "b", ttl: 900).expiryTimers == [])
        #expect(send(&router, id, "c", ttl: 200).expiryTimers == [1_200])
        #expect(router.expiry.sessions == [id] && router.expiryAudit() == [])
        router.now.wallMS = 1_200
        let due = router.completing(router.expireDue())
        #expect(due.expired.map(\.seq) == [3])
        #expect(due.expiryTimers == [1_500])
        #expect(router.expiryAudit() == [])
        router.now.wallMS = 1_900
        let rest = router.completing(router.expireDue())
        #expect(rest.expired.map(\.seq) == [1, 2])
        #expect(rest.expiryTimers == [] && router.expiry.timer == nil)
        #expect(router.expiry.sessions.isEmpty)  // no TTL left: forgotten
    }

    @Test func aClosedSession_leavesTheSchedule() {
        var router = makeRouter()
        router.now.wallMS = 1_000
        let id = router.newSession()
        _ = send(&router, id, "a", ttl: 500)
        #expect(router.expiry.tracks(id))
        _ = router.completing(router.clientClose(alice, request: 10, session: id))
        #expect(router.table[id] == nil)
        #expect(!router.expiry.tracks(id))
        #expect(router.expiryAudit() == [])
    }

    @Test func messagesReadIntoTheWindow_setTheTimerForTheirTTLs_whenItFiredDuringTheRead() {
        // One message of 100 bytes fits a budget of 300: the rest stay in the store only.
        var router = makeRouter(SessionLimits(memoryBudgetBytes: 300))
        router.now.wallMS = 1_000
        let disk = StoredPayloads()
        let id = router.newSession()
        _ = router.establish()
        let body = { (n: Int) in String(repeating: "\(n)", count: 100) }
        #expect(send(&router, id, body(1), ttl: nil, disk: disk).dataSeqs == [1])
        _ = send(&router, id, body(2), ttl: 500, disk: disk)  // due at 1,500
        _ = send(&router, id, body(3), ttl: 3_000, disk: disk)  // due at 4,000
        #expect(router.table[id]?.outbound.window.count == 1 && router.expiry.timer == 1_500)
        // The server's ACK empties the window: the read of seqs 2 and 3 starts, and is answered
        // only after the link went and the timer fired, which found the read under way.
        let read = router.received(.ack(Ack(session: id, seq: 1)))
        #expect(read.contains { if case .store(.outbound, _, _) = $0 { true } else { false } })
        _ = router.linkLost()
        router.now.wallMS = 1_600
        #expect(router.completing(router.expireDue(), disk: disk).expired.isEmpty)
        #expect(router.expiry.timer == nil)
        _ = router.completing(read, disk: disk)
        #expect(router.table[id]?.outbound.window.first?.seq == 2)
        // Seq 2's TTL passed: the timer is set for it, or it waits for the next link.
        #expect(router.expiry.timer == 1_500)
        #expect(router.expiryAudit() == [])
        #expect(router.completing(router.expireDue(), disk: disk).expired.map(\.seq) == [2])
    }

    @Test func aFullBatchOfTheStoresExpiry_leavesTheTimerSetForTheNextDeadline() {
        // One message of 100 bytes fits a budget of 300: the rest stay in the store only.
        var router = makeRouter(SessionLimits(memoryBudgetBytes: 300, expiryBatch: 2))
        router.now.wallMS = 1_000
        let disk = StoredPayloads()
        let id = router.newSession()
        let body = { (n: Int) in String(repeating: "\(n)", count: 100) }
        _ = send(&router, id, body(1), ttl: nil, disk: disk)
        for n in 2...5 { _ = send(&router, id, body(n), ttl: 500, disk: disk) }  // due at 1,500
        _ = send(&router, id, body(6), ttl: 1_000, disk: disk)  // due at 2,000
        #expect(router.table[id]?.outbound.window.count == 1)
        router.now.wallMS = 1_500
        let due = router.completing(router.expireDue(), disk: disk)
        #expect(due.expired.map(\.seq) == [2, 3, 4, 5])
        #expect(due.expiryTimers == [2_000])
        #expect(router.expiryAudit() == [])
        router.now.wallMS = 2_000
        #expect(router.completing(router.expireDue(), disk: disk).expired.map(\.seq) == [6])
        #expect(router.table[id]?.outboxCount == 1)
    }
}
