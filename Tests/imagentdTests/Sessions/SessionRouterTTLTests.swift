import AgentIPC
import AgentStore
import IMLink
import NIOCore
import Testing

@testable import IMAgentCore

extension [SessionAction] {
    var expired: [IPCMessage.Expired] {
        events.compactMap { if case .expired(let expired) = $0 { expired } else { nil } }
    }

    var dataPayloads: [String] {
        frames.compactMap { if case .data(let data) = $0 { String(buffer: data.body) } else { nil } }
    }

    var expiryTimers: [Int64] {
        compactMap { if case .expireAt(let deadline) = $0 { deadline } else { nil } }
    }
}


@Suite struct SessionRouterTTLTests {
    /// A router whose wall clock reads 1,000 ms; a test moves it by setting `now.wallMS`.
    private func router() -> TestRouter {
        var router = makeRouter()
        router.now.wallMS = 1_000
        return router
    }

    private func send(_ router: inout TestRouter, _ id: UInt64, _ text: String, ttl: UInt32? = nil) -> [SessionAction] {
        router.completing(router.clientSend(alice, request: 9, .init(session: id, payload: bytes(text), ttlMS: ttl)))
    }

    @Test func ttlPassingBeforeTheLinkIsUp_givesTheMessageUp_andTheWireHasNoGap() {
        var router = router()
        let id = router.newSession()
        _ = send(&router, id, "one")
        #expect(send(&router, id, "two", ttl: 500).expiryTimers == [1_500])
        _ = send(&router, id, "three", ttl: 0)  // 0: forever
        router.now.wallMS = 1_499
        #expect(router.completing(router.expireDue()).expired.isEmpty)
        router.now.wallMS = 1_500
        let due = router.completing(router.expireDue())
        #expect(due.expired.map(\.seq) == [2])
        #expect(due.expired.first?.code == .expired)

        let up = router.establish()
        #expect(up.dataSeqs == [1, 2])
        #expect(up.dataPayloads == ["one", "three"])
        // The server's ACK 2 (wire) covers IPC seq 3.
        #expect(router.completing(router.received(.ack(Ack(session: id, seq: 2)))).ackedEvents == [3])
        #expect(router.table[id]?.outboxCount == 0)
        #expect(send(&router, id, "four").dataSeqs == [3])
    }

    @Test func ttlsAfterTheWindow_areFoundByTheStore_inBatches_andTheWireHasNoGap() {
        // A budget of 300 bytes keeps no message of 100 in memory once one is: the rest stay in
        // the store only, and only the store's index finds their TTLs.
        var router = makeRouter(SessionLimits(memoryBudgetBytes: 300, expiryBatch: 2))
        router.now.wallMS = 1_000
        let disk = StoredPayloads()
        let id = router.newSession()
        let body = { (n: Int) in String(repeating: "\(n)", count: 100) }
        for n in 1...8 {
            // Seqs 2, 4, 6 and 8 expire at 1,500; the others never.
            let actions = router.completing(router.clientSend(alice, request: 9, .init(session: id, payload: bytes(body(n)),
                                                                                          ttlMS: n % 2 == 0 ? 500 : nil)), disk: disk)
            #expect(actions.accepted == [UInt64(n)])
        }
        let session = router.table[id]!
        #expect(session.outbound.storedCount == 8 && session.outbound.window.count < 8)
        router.now.wallMS = 1_500
        let due = router.completing(router.expireDue(), disk: disk)
        #expect(due.expired.map(\.seq) == [2, 4, 6, 8])
        #expect(router.table[id]?.outboxCount == 4)
        #expect(router.table[id]?.outboxTotalBytes == 400)
        #expect(router.table[id]?.outbound.givenUp == 4)
        #expect(disk.outbound[id]?.map(\.seq) == [1, 3, 5, 7])

        var up = router.linkEstablished(flow: true)
        up += router.completing(router.received(.openOK(OpenOK(session: id, lastAcked: 0))), disk: disk)
        var sent = up.dataSeqs
        var payloads = up.dataPayloads
        // The window refills as the server acknowledges.
        while let last = sent.last, sent.count < 4 {
            let more = router.completing(router.received(.ack(Ack(session: id, seq: last))), disk: disk)
            sent += more.dataSeqs
            payloads += more.dataPayloads
        }
        #expect(sent == [1, 2, 3, 4])
        #expect(payloads == [body(1), body(3), body(5), body(7)])
        let acked = router.completing(router.received(.ack(Ack(session: id, seq: 4))), disk: disk)
        #expect(acked.ackedEvents.last == 7)
        #expect(router.table[id]?.outboxCount == 0)
    }

    @Test func aRestartedOutboxAcknowledgedPastTheWindow_isFoundInTheStore_withItsGaps() {
        // Seqs 1…6 stored, 2 and 4 given up before the crash: wire 1…4 are seqs 1, 3, 5, 6.
        var router = makeRouter()
        let stored = IndexedSession.restored(9, service: "echo", ackedSeq: 0, deliveredSeq: 0,
            outbox: [OutboundIndexEntry(seq: 1, bytes: 1), OutboundIndexEntry(seq: 3, bytes: 1), OutboundIndexEntry(seq: 5, bytes: 1),
                     OutboundIndexEntry(seq: 6, bytes: 1)],
            sentSeq: 6, receivedSeq: 0, givenUp: 2)
        let disk = StoredPayloads(outbound: [9: [(1, bytes("a")), (3, bytes("c")), (5, bytes("e")), (6, bytes("f"))]])
        router.restore(StoreIndex(sessions: [stored]))
        let opens = router.linkEstablished(flow: true)
        let ok = router.received(.openOK(OpenOK(session: 9, lastAcked: 3)))
        // Nothing is sent until the store says what LAST_ACKED 3 covers.
        #expect(ok.dataSeqs.isEmpty)
        #expect(ok.contains { if case .store(.outboundSpan(9, 0, 3), _, .located(9)) = $0 { true } else { false } })
        let up = opens + router.completing(ok, disk: disk)
        #expect(up.persists.contains(.ackedStored(session: 9, seq: 5)))
        #expect(up.dataSeqs == [4])
        #expect(up.dataPayloads == ["f"])
        #expect(router.table[9]?.outbound.storedCount == 1 && router.table[9]?.outbound.storedBytes == 1)
    }

    @Test func aMessageOnTheLink_isLeftToTheServer_untilTheNextOpenOKSaysItLacksIt() {
        var router = router()
        let id = router.newSession()
        _ = router.establish()
        #expect(send(&router, id, "a", ttl: 100).dataSeqs == [1])
        _ = send(&router, id, "b", ttl: 100)
        router.now.wallMS = 5_000
        #expect(router.completing(router.expireDue()).expired.isEmpty)  // both in flight
        _ = router.linkLost()
        #expect(router.completing(router.expireDue()).expired.isEmpty)  // they may have reached the server
        // The new link's OPEN_OK: the server has "a", not "b".
        let again = router.establish(lastAcked: { _ in 1 })
        #expect(again.ackedEvents == [1])
        #expect(again.expired.map(\.seq) == [2])
        #expect(again.dataSeqs.isEmpty)
    }

    @Test func afterARestart_wireSeqsAreRebuiltFromTheGivenUpCount() {
        // Seq 2 was given up before seq 3 was acknowledged (wire 2), seq 5 after: wire 3, 4 are seqs 4, 6.
        var router = makeRouter()
        let stored = IndexedSession.restored(77, service: "echo", ackedSeq: 3, deliveredSeq: 0, outbox: [OutboundIndexEntry(seq: 4, bytes: 1), OutboundIndexEntry(seq: 6, bytes: 1)],
            sentSeq: 6, receivedSeq: 0, givenUp: 2)
        let disk = StoredPayloads(outbound: [77: [(4, bytes("d")), (6, bytes("f"))]])
        router.restore(StoreIndex(sessions: [stored]))
        let opens = router.linkEstablished(flow: true)
        let up = opens + router.completing(router.received(.openOK(OpenOK(session: 77, lastAcked: 2))), disk: disk)
        #expect(up.dataSeqs == [3, 4])
        #expect(up.dataPayloads == ["d", "f"])
        #expect(router.completing(router.received(.ack(Ack(session: 77, seq: 4)))).persists.contains(.ackedStored(session: 77, seq: 6)))
    }

    @Test func aMessageLargerThanTheServersMaxFrame_failsAlone() {
        var router = router()
        let id = router.newSession()
        let opens = router.linkEstablished(flow: true, maxFrame: 1_024).opens
        _ = router.completing(router.received(.openOK(OpenOK(session: opens[0].session, lastAcked: 0))))
        #expect(send(&router, id, "small").dataSeqs == [1])
        let big = send(&router, id, String(repeating: "x", count: 2_000))
        #expect(big.dataSeqs.isEmpty)
        #expect(big.expired.map(\.seq) == [2])
        #expect(big.expired.first?.code == .payloadTooLarge)
        #expect(send(&router, id, "after").dataSeqs == [2])
        #expect(!big.dropsLink)
    }
}
