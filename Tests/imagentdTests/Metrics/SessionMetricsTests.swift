import IMLink
import Testing

@testable import IMAgentCore

/// What the session router counts for the metrics: resends, redeliveries and
/// the send→ACK latency, driven on the pure router with a fake monotonic clock.
@Suite struct SessionMetricsTests {
    @Test func dataWrittenAgainOnALaterLink_countsAsResent_andTheFirstWritesDoNot() {
        var router = makeRouter()
        let id = router.newSession()
        _ = router.establish()
        for n in 1...3 { #expect(router.send(id, "m\(n)").dataSeqs.count == 1) }
        #expect(router.totals.resent == 0)
        _ = router.completing(router.received(.ack(Ack(session: id, seq: 1))))
        _ = router.linkLost()
        let again = router.establish(lastAcked: { _ in 1 })
        #expect(again.dataSeqs == [2, 3])
        #expect(router.totals.resent == 2)
        // A message first written on the new link is no resend.
        #expect(router.send(id, "m4").dataSeqs == [4])
        #expect(router.totals.resent == 2)
        #expect(router.totals.accepted == 4)
    }

    @Test func messagesHandedToAClientAgainAfterReattach_countAsRedelivered() {
        var router = makeRouter()
        let disk = StoredPayloads()
        let id = router.newSession()
        _ = router.establish()
        for seq in 1...4 { _ = router.data(id, UInt64(seq), disk: disk) }
        #expect(router.totals.redelivered == 0)
        _ = router.clientAck(alice, request: 0, session: id, seq: 2)
        _ = router.clientDisconnected(alice.id)
        _ = router.data(id, 5, disk: disk)
        let attached = router.completing(router.clientOpen(aliceAgain, request: 1, .init(session: id)), disk: disk)
        #expect(attached.delivered == [3, 4, 5])
        #expect(router.totals.redelivered == 2)  // 3 and 4 again; 5 is new
        #expect(router.totals.received == 5)
        _ = router.data(id, 4, disk: disk)  // a duplicate from the server is no new message
        #expect(router.totals.received == 5)
    }

    @Test func sendAckLatency_runsFromAcceptedToTheServersAck_onceForEachMessage() {
        var router = makeRouter()
        let start = router.now.instant
        let id = router.newSession()
        _ = router.establish()
        #expect(router.send(id, "a").accepted == [1])
        router.now.instant = start + .milliseconds(5)
        #expect(router.send(id, "b").accepted == [2])
        router.now.instant = start + .milliseconds(30)
        let acked = router.completing(router.received(.ack(Ack(session: id, seq: 2))))
        #expect(acked.latencies == [.milliseconds(30), .milliseconds(25)])
        // An ACK repeated on a later link's OPEN_OK is not measured again.
        _ = router.linkLost()
        #expect(router.establish(lastAcked: { _ in 2 }).latencies.isEmpty)
    }
}

@Suite struct ReconnectCauseTests {
    @Test func aReconnectIsCountedOnceTheNextLinkIsUp_underTheCauseOfTheLoss() {
        let traffic = LinkTraffic()
        traffic.linkEstablished()  // the first link is no reconnect
        traffic.linkLost(.pathSilent)
        #expect(traffic.counts.reconnects.isEmpty)
        traffic.linkEstablished()
        traffic.linkLost(nil)
        traffic.linkEstablished()
        traffic.linkLost(.serverOverloaded)
        traffic.linkEstablished()
        traffic.linkEstablished()  // no loss in between: nothing more
        #expect(traffic.counts.reconnects == [.pathSilent: 1, .other: 1, .serverOverloaded: 1])
        #expect(ReconnectCause.allCases.map(\.rawValue) == ["path_silent", "server_refusing", "server_overloaded", "other"])
    }
}
