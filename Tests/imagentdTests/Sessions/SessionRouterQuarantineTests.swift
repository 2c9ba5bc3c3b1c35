import AgentIPC
import IMLink
import NIOCore
import Testing

@testable import IMAgentCore

/// A session whose message brings the link down again and again is quarantined (`PoisonWatch`).
@Suite struct SessionRouterQuarantineTests {
    /// The link is lost `times` times by the server's side, each time after it came back and every OPEN was answered.
    private func loseLink(_ router: inout TestRouter, times: Int, byServer: Bool = true, after delay: Duration = .zero,
                          lastAcked: (UInt64) -> UInt64 = { _ in 0 }) -> [SessionAction] {
        var all: [SessionAction] = []
        for _ in 0..<times {
            all += router.establish(lastAcked: lastAcked)
            var later = router.now
            later.instant = later.instant + delay
            all += router.linkLost(byServer: byServer, now: later)
        }
        return all
    }

    private func reasons(_ actions: [SessionAction]) -> [String] {
        actions.events.compactMap { if case .sessionState(let change) = $0, change.state == .failed { change.message } else { nil } }
    }

    @Test func theSameMessageInFlightAtThreeServerLosses_quarantinesItsSessionAlone() {
        var router = makeRouter()
        let poison = router.newSession(service: "poison")
        let other = router.newSession(service: "echo")
        _ = router.send(poison, "kills the server")
        let first = loseLink(&router, times: PoisonWatch.quarantineAfter - 1)
        #expect(first.sessionStates.allSatisfy { $0 != .failed })

        let third = loseLink(&router, times: 1)
        let failed = third.events.compactMap { if case .sessionState(let change) = $0, change.state == .failed { change } else { nil } }
        #expect(failed.map(\.session) == [poison])
        #expect(failed.first?.code == .upstreamRejected)
        #expect(failed.first?.message?.contains("quarantined: the link was lost 3 times just after seq 1") == true,
                "\(String(describing: failed.first?.message))")
        #expect(third.contains { if case .log(.warning, let text) = $0 { text.contains("session \(poison) of uid 1000 quarantined") } else { false } })
        #expect(router.totals.quarantined == 1)

        // Nothing more of it goes upstream; SEND says why; the other session goes on.
        let send = router.clientSend(alice, request: 9, .init(session: poison, payload: bytes("more")))
        #expect(send.errors == [.upstreamRejected])
        #expect(send.contains { if case .fail(_, _, _, let text) = $0 { text.contains("quarantined") } else { false } })
        let next = router.establish()
        #expect(next.opens.map(\.session) == [other])
        #expect(router.send(other, "hello").dataSeqs == [1])
        // Its owner can still close it.
        let closed = router.completing(router.clientClose(alice, request: 10, session: poison))
        #expect(closed.replies.contains { if case .ok = $0 { true } else { false } })
    }

    @Test func aSessionWrittenAfterThePoison_isNotQuarantinedWithIt() {
        var router = makeRouter()
        // Higher priority: on every link its DATA goes first, and the server reads no further.
        let poison = router.newSession(service: "poison", priority: .high)
        let behind = router.newSession(service: "behind", priority: .low)
        _ = router.send(poison, "kills the server")
        _ = router.send(behind, "never read")
        let actions = loseLink(&router, times: PoisonWatch.quarantineAfter)
        #expect(actions.events.compactMap { if case .sessionState(let change) = $0, change.state == .failed { change.session } else { nil } }
                == [poison])
        #expect(router.table[behind]?.isFailed == false)
        // Once the poison is out of the way, the other message gets through and its count clears.
        _ = router.establish()
        _ = router.received(.ack(Ack(session: behind, seq: 1)))
        #expect(router.table[behind]?.poison == PoisonWatch())
    }

    @Test func anAcknowledgementBetweenLosses_startsTheCountOver() {
        var router = makeRouter()
        let id = router.newSession()
        _ = router.send(id, "one")
        var actions = loseLink(&router, times: PoisonWatch.quarantineAfter - 1)
        // OPEN_OK's LAST_ACKED says the server has it after all.
        _ = router.establish(lastAcked: { _ in 1 })
        _ = router.send(id, "two")
        actions += router.linkLost(byServer: true, now: router.now)
        actions += loseLink(&router, times: PoisonWatch.quarantineAfter - 2, lastAcked: { _ in 1 })
        #expect(reasons(actions).isEmpty)
        #expect(router.table[id]?.isFailed == false)
        #expect(router.table[id]?.poison.losses == PoisonWatch.quarantineAfter - 1)
    }

    @Test func lossesThatAreNotTheServersOrLongAfterTheMessage_countNot() {
        var router = makeRouter()
        let id = router.newSession()
        _ = router.send(id, "stuck")
        var actions = loseLink(&router, times: 5, byServer: false)
        actions += loseLink(&router, times: 5, after: PoisonWatch.window + .seconds(1))
        #expect(reasons(actions).isEmpty)
        #expect(router.table[id]?.poison.losses == 0)
    }
}
