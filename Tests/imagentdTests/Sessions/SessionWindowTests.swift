import AgentIPC
import IMLink
import NIOCore
import Testing

@testable import IMAgentCore

/// The store is the queue: memory holds a bounded window of payloads per direction,
/// the rest is read from the store in seq order when its turn comes.
@Suite struct SessionWindowTests {
    static let budget = SessionLimits(memoryBudgetBytes: 4_096, readBatch: 8)

    func payload(_ seq: Int, size: Int = 100) -> String {
        String(repeating: Character(UnicodeScalar(UInt8(65 + seq % 26))), count: size)
    }

    @Test func queuedOutboundPayloadsBeyondTheBudget_stayInTheStore_andStreamInSeqOrder() {
        var router = makeRouter(Self.budget)
        let disk = StoredPayloads()
        let id = router.newSession()
        for seq in 1...100 {
            let sent = router.completing(router.clientSend(alice, request: 7, .init(session: id, payload: bytes(payload(seq)))), disk: disk)
            #expect(sent.accepted == [UInt64(seq)])
            #expect(router.budget.held <= Self.budget.memoryBudgetBytes)
        }
        #expect(router.budget.held <= (Self.budget.memoryBudgetBytes / 4))  // the server is down: one share at most
        #expect(router.table[id]?.outbound.storedBytes == 100 * 100)

        // The server comes up: everything goes, in order, each message once, through a bounded window.
        var wire: [(UInt64, String)] = []
        var actions = router.linkEstablished(flow: true)
        actions += router.received(.openOK(OpenOK(session: id, lastAcked: 0)))
        var rounds = 0
        while rounds < 1_000 {
            rounds += 1
            let done = router.completing(actions, disk: disk)
            let data = done.frames.compactMap { frame -> DataFrame? in if case .data(let d) = frame { d } else { nil } }
            #expect(router.budget.held <= Self.budget.memoryBudgetBytes)
            guard let last = data.last else { break }
            wire += data.map { ($0.seq, String(buffer: $0.body)) }
            actions = router.received(.ack(Ack(session: id, seq: last.seq)))
        }
        #expect(wire.map(\.0) == Array(1...100))
        #expect(wire.map(\.1) == (1...100).map { payload($0) })
        #expect(router.table[id]?.outboxCount == 0)
        #expect(router.table[id]?.outbound.storedBytes == 0)
        #expect(router.budget.held == 0)
    }

    @Test func aBusySession_doesNotStarveAFreshOne() {
        var router = makeRouter(Self.budget)
        let disk = StoredPayloads()
        let backlog = router.newSession()
        for seq in 1...50 { _ = router.completing(router.clientSend(alice, request: 7, .init(session: backlog, payload: bytes(payload(seq)))), disk: disk) }
        _ = router.completing(router.establish(), disk: disk)
        let fresh = router.newSession(service: "live")
        _ = router.completing(router.received(.openOK(OpenOK(session: fresh, lastAcked: 0))), disk: disk)
        let live = router.completing(router.clientSend(alice, request: 9, .init(session: fresh, payload: bytes("now"))), disk: disk)
        #expect(live.frames.contains { if case .data(let d) = $0 { d.session == fresh } else { false } })
    }

    /// Four sessions whose windows fill the budget exactly (four 128-byte payloads, 256 each);
    /// their ids. The link is down: the messages wait in memory for it.
    func fillTheBudget(_ router: inout TestRouter, disk: StoredPayloads) -> [UInt64] {
        let busy = (0..<4).map { router.newSession(service: "busy\($0)") }
        for id in busy {
            for seq in 1...4 { _ = router.completing(router.clientSend(alice, request: 7, .init(session: id, payload: bytes(payload(seq, size: 128)))), disk: disk) }
        }
        return busy
    }

    /// A session whose read waited for room in the budget, while other sessions' messages
    /// on the link filled it, was never woken when their ACKs freed it (only finished reads
    /// and deliveries woke waiters): its window stayed empty, its queue in the store and the
    /// link idle, until the next link. (The stall chaos hit was its sibling, a waiter dropped
    /// when its other direction's read started: `SessionRouterRandomTests` finds that one.)
    @Test func aSessionWaitingForTheBudget_readsOnWhenACKsFreeIt() {
        var router = makeRouter(Self.budget)
        let disk = StoredPayloads()
        let busy = fillTheBudget(&router, disk: disk)
        #expect(router.budget.held == Self.budget.memoryBudgetBytes)
        let waiting = router.newSession(service: "waiting")
        for seq in 1...3 { _ = router.completing(router.clientSend(alice, request: 7, .init(session: waiting, payload: bytes(payload(seq)))), disk: disk) }
        #expect(router.table[waiting]?.outbound.window.isEmpty == true)  // no room: in the store only

        var actions = router.linkEstablished(flow: true)
        for id in busy + [waiting] { actions += router.received(.openOK(OpenOK(session: id, lastAcked: 0))) }
        let opened = router.completing(actions, disk: disk)
        #expect(opened.dataSeqs.count == 16)  // the busy sessions' windows; the waiting one has no room
        #expect(router.budget.waiters == [waiting])

        // The server acknowledges everything on the link: the budget is free, the waiting session sends.
        var sent: [DataFrame] = []
        for id in busy {
            let acked = router.completing(router.received(.ack(Ack(session: id, seq: 4))), disk: disk)
            sent += acked.frames.compactMap { if case .data(let data) = $0, data.session == waiting { data } else { nil } }
        }
        #expect(sent.map(\.seq) == [1, 2, 3])
        #expect(router.budget.waiters.isEmpty)
    }

    /// The same for an inbound read: a client attaching while the budget is full gets its
    /// messages once ACKs free it.
    @Test func anInboundReadWaitingForTheBudget_readsOnWhenACKsFreeIt() {
        var router = makeRouter(Self.budget)
        let disk = StoredPayloads()
        let busy = fillTheBudget(&router, disk: disk)
        let reader = router.newSession(aliceAgain, service: "reader")
        _ = router.completing(router.clientDetach(aliceAgain, request: 2, session: reader), disk: disk)
        var actions = router.linkEstablished(flow: true)
        for id in busy + [reader] { actions += router.received(.openOK(OpenOK(session: id, lastAcked: 0))) }
        _ = router.completing(actions, disk: disk)
        for seq in 1...3 { _ = router.data(reader, UInt64(seq), payload(seq), disk: disk) }
        // The reader attaches while the budget is full: its read waits.
        let attached = router.completing(router.clientOpen(aliceAgain, request: 3, .init(session: reader)), disk: disk)
        #expect(attached.delivered.isEmpty)
        #expect(router.budget.waiters.contains(reader))
        var delivered: [UInt64] = []
        for id in busy { delivered += router.completing(router.received(.ack(Ack(session: id, seq: 4))), disk: disk).delivered }
        #expect(delivered == [1, 2, 3])
    }

    @Test func inboundForADetachedClient_staysInTheStore_andIsReadBackOnAttach() {
        var router = makeRouter(Self.budget)
        let disk = StoredPayloads()
        let id = router.newSession()
        _ = router.completing(router.establish(), disk: disk)
        _ = router.clientDisconnected(alice.id)
        for seq in 1...60 {
            _ = router.completing(router.received(.data(DataFrame(session: id, seq: UInt64(seq), body: bytes(payload(seq))))), disk: disk)
        }
        #expect(router.budget.held == 0)  // nobody reads: nothing in memory
        var delivered: [UInt64] = []
        var actions = router.completing(router.clientOpen(aliceAgain, request: 1, .init(session: id)), disk: disk)
        var rounds = 0
        while rounds < 100 {
            rounds += 1
            let seqs = actions.delivered
            #expect(router.budget.held <= Self.budget.memoryBudgetBytes)
            guard !seqs.isEmpty else { break }
            delivered += seqs
            actions = router.completing(router.batchWritten(session: id, client: aliceAgain.id, writable: true), disk: disk)
        }
        #expect(delivered == (1...60).map(UInt64.init))
    }

    @Test func aServerIgnoringWindow_isDroppedWithAnError() {
        var router = makeRouter()
        let id = router.newSession()
        _ = router.establish()
        let beyond = UInt64(Session.defaultWindow) + 1
        for seq in 1..<beyond {
            // Stored but not yet acknowledged upstream (the flush has not run).
            _ = router.completing(router.received(.data(DataFrame(session: id, seq: seq, body: bytes("x")))))
        }
        #expect(router.completing(router.received(.data(DataFrame(session: id, seq: beyond, body: bytes("x"))))).dropsLink)
    }

    @Test func dataWaitingForASlowStore_stopsReadingFromTheLink_untilHalfIsStored() {
        var router = makeRouter(SessionLimits(memoryBudgetBytes: 1_000))
        let id = router.newSession()
        _ = router.establish()
        // Ten DATA of 200 bytes arrive faster than the store commits them.
        var pending: [SessionAction] = []
        var paused = false
        for seq in 1...10 {
            let actions = router.received(.data(DataFrame(session: id, seq: UInt64(seq), body: bytes(payload(seq, size: 200)))))
            if actions.contains(where: { if case .linkReading(false) = $0 { true } else { false } }) { paused = true }
            pending += actions
        }
        #expect(paused)
        #expect(router.budget.linkReadingPaused)
        let stored = router.completing(pending)
        #expect(stored.contains { if case .linkReading(true) = $0 { true } else { false } })
        #expect(router.budget.storingIn == 0 && !router.budget.linkReadingPaused)
    }

    @Test func aLocalStoreFailure_isNotBlamedOnTheServer() {
        var router = makeRouter()
        let id = router.newSession()
        _ = router.establish()
        let failed = router.completing(router.received(.data(DataFrame(session: id, seq: 1, body: bytes("x")))), .failure(.failed("disk I/O error")))
        #expect(!failed.dropsLink)  // no ERROR PROTOCOL to a server that did nothing wrong
        #expect(failed.contains { if case .storeFailed(let reason) = $0 { reason.contains("disk I/O error") } else { false } })
        #expect(failed.ackSeqs.isEmpty)
    }

    @Test func aSendPastTheSessionByteLimit_getsQueueFull_namingTheLimit() {
        var router = makeRouter(SessionLimits(outboxBytes: 250))
        let id = router.newSession()
        #expect(router.send(id, payload(1)).accepted == [1])
        #expect(router.send(id, payload(2)).accepted == [2])
        let refused = router.completing(router.clientSend(alice, request: 8, .init(session: id, payload: bytes(payload(3)))))
        #expect(refused.errors == [.queueFull])
        #expect(refused.contains { if case .fail(_, _, _, let text) = $0 { text.contains("outbox_bytes = 250") } else { false } })
        _ = router.completing(router.establish())
        _ = router.completing(router.received(.ack(Ack(session: id, seq: 2))))  // acknowledged upstream: room again
        #expect(router.send(id, payload(3)).accepted == [3])
    }

    @Test func aSendPastTheUIDByteLimit_getsQueueFull_acrossSessions() {
        var router = makeRouter(SessionLimits(uidOutboxBytes: 250))
        let first = router.newSession()
        let second = router.newSession(service: "other")
        #expect(router.send(first, payload(1)).accepted == [1])
        #expect(router.send(second, payload(2)).accepted == [1])
        let refused = router.completing(router.clientSend(alice, request: 8, .init(session: first, payload: bytes(payload(3)))))
        #expect(refused.contains { if case .fail(_, _, .queueFull, let text) = $0 { text.contains("uid_outbox_bytes = 250") } else { false } })
        // Another uid is not affected.
        let other = router.newSession(mallory)
        #expect(router.send(other, payload(4), as: mallory).accepted == [1])
        #expect(router.table.outboxBytesByUID[alice.uid] == 200)
    }
}

/// The link's side of a local store failure: closed without ERROR, then a backoff, as after a failed attempt.
@Suite struct LocalStoreFailureLinkTests {
    @Test func aLocalFailure_closesWithoutError_andBacksOff() {
        var machine = makeMachine()
        let attempt = connectedMachine(&machine, now: at(0))
        let failed = machine.localFailure(attempt, reason: "inbound seq 7 not stored: disk I/O error", now: at(5))
        #expect(failed.last == .closeConnection(attempt, sendError: nil))
        let closed = machine.connectionClosed(attempt, reason: "closed by us", now: at(5))
        guard case .waitingToReconnect(let until)? = closed.enteredPhase else {
            Issue.record("a local failure backs off: \(closed)")
            return
        }
        #expect(until > at(5))
        // Not for an attempt that is gone.
        #expect(machine.localFailure(attempt, reason: "late", now: at(6)).isIgnored)
    }
}
