import AgentIPC
import AgentStore
import IMLink
import NIOCore
import Testing

@testable import IMAgentCore

@Suite struct SessionRouterOpenTests {
    @Test func openedComesOnlyAfterTheSessionIsStored() {
        var router = makeRouter()
        let asked = router.clientOpen(alice, request: 1, .init(service: "echo"))
        #expect(asked.replies.isEmpty)
        #expect(asked.persists.count == 1)
        let done = router.completing(asked)
        #expect(done.opened?.sessionState == .pending)
        #expect(done.opened?.session != 0)
        #expect(done.opens.isEmpty)  // no link yet
    }

    @Test func newSessionsGetDistinctNonZeroIds_andOpenUpstreamWhenTheLinkIsUp() {
        var router = makeRouter()
        _ = router.linkEstablished(flow: true)
        let done = router.completing(router.clientOpen(alice, request: 1, .init(service: "echo")))
        let id = done.opened!.session
        #expect(done.opens.map(\.session) == [id])
        #expect(done.opens.first?.resumeAfter == 0)
        #expect(done.opens.first?.window == 1024)
        let other = router.newSession()
        #expect(other != id && other != 0)
    }

    @Test func linkEstablishedOpensEverySession_withResumeAfterTheStoredInboundSeq() {
        var router = makeRouter()
        let a = router.newSession()
        let b = router.newSession()
        _ = router.establish()
        _ = router.data(a, 1)
        _ = router.data(a, 2)
        _ = router.linkLost()
        let again = router.linkEstablished(flow: false)
        #expect(Set(again.opens.map(\.session)) == [a, b])
        #expect(again.opens.first { $0.session == a }?.resumeAfter == 2)
        #expect(again.opens.first { $0.session == a }?.window == nil)  // no FLOW negotiated
    }

    @Test func limitOnSessionsAnswersLimitReached() {
        var router = makeRouter(SessionLimits(maxSessions: 1))
        _ = router.newSession()
        #expect(router.clientOpen(alice, request: 2, .init(service: "echo")).errors == [.limitReached])
    }
}

@Suite struct SessionRouterOwnershipTests {
    @Test func anotherUidCannotAttachSendCloseOrAck() {
        var router = makeRouter()
        let id = router.newSession()
        #expect(router.clientOpen(mallory, request: 2, .init(session: id)).errors == [.permissionDenied])
        #expect(router.clientSend(mallory, request: 3, .init(session: id, payload: bytes("x"))).errors == [.permissionDenied])
        #expect(router.clientClose(mallory, request: 4, session: id).errors == [.permissionDenied])
        #expect(router.clientAck(mallory, request: 5, session: id, seq: 0).errors == [.permissionDenied])
        #expect(router.clientDetach(mallory, request: 6, session: id).errors == [.permissionDenied])
        #expect(router.table[id] != nil)
    }

    @Test func secondAttachIsBusy_untilTheFirstClientDetachesOrLeaves() {
        var router = makeRouter()
        let id = router.newSession()
        #expect(router.clientOpen(aliceAgain, request: 2, .init(session: id)).errors == [.sessionBusy])
        #expect(router.clientSend(aliceAgain, request: 2, .init(session: id, payload: bytes("x"))).errors == [.sessionBusy])
        _ = router.clientDisconnected(alice.id)
        #expect(router.clientOpen(aliceAgain, request: 3, .init(session: id)).opened?.session == id)
        #expect(router.clientDetach(aliceAgain, request: 4, session: id).replies == [.ok(.init())])
        #expect(router.table[id]?.attachedClient == nil)
    }

    @Test func anAdminMayAttachAnyonesSession() {
        var router = makeRouter()
        let id = router.newSession()
        _ = router.clientDisconnected(alice.id)
        #expect(router.clientOpen(root, request: 2, .init(session: id)).opened?.session == id)
    }

    @Test func unknownAndClosedSessionsAreTold() {
        var router = makeRouter()
        #expect(router.clientOpen(alice, request: 1, .init(session: 99)).errors == [.unknownSession])
        let id = router.newSession()
        let closed = router.completing(router.clientClose(alice, request: 2, session: id))
        #expect(closed.replies == [.ok(.init())])
        #expect(router.clientOpen(alice, request: 3, .init(session: id)).errors == [.sessionClosed])
        #expect(router.clientSend(alice, request: 4, .init(session: id, payload: bytes("x"))).errors == [.sessionClosed])
        #expect(router.table.closedIDs.contains(id))
    }

    @Test func closeGoesUpstream_atOnceOrOnTheNextLink() {
        var router = makeRouter()
        let a = router.newSession()
        let b = router.newSession()
        _ = router.establish()
        let now = router.completing(router.clientClose(alice, request: 2, session: a))
        #expect(now.frames == [.close(Close(session: a))])
        _ = router.linkLost()
        _ = router.completing(router.clientClose(alice, request: 3, session: b))
        let next = router.linkEstablished(flow: true)
        #expect(next.frames == [.close(Close(session: b))])
    }
}

@Suite struct SessionRouterOutboundTests {
    @Test func acceptedOnlyAfterTheMessageIsStored_thenDataWithinTheWindow() {
        var router = makeRouter()
        let id = router.newSession()
        _ = router.establish()
        let asked = router.clientSend(alice, request: 7, .init(session: id, payload: bytes("one")))
        #expect(asked.accepted.isEmpty)
        #expect(asked.dataSeqs.isEmpty)
        let done = router.completing(asked)
        #expect(done.accepted == [1])
        #expect(done.dataSeqs == [1])
        #expect(router.send(id, "two").dataSeqs == [2])
    }

    @Test func nothingIsSentBeforeOpenOK_andResumeStartsAfterLastAcked() {
        var router = makeRouter()
        let id = router.newSession()
        for n in 1...5 { #expect(router.send(id, "m\(n)").accepted == [UInt64(n)]) }
        let opening = router.linkEstablished(flow: true)
        #expect(opening.dataSeqs.isEmpty)
        let ok = router.completing(router.received(.openOK(OpenOK(session: id, lastAcked: 3))))
        #expect(ok.dataSeqs == [4, 5])
        #expect(ok.ackedEvents == [3])
        #expect(router.table[id]?.outboxCount == 2)
    }

    @Test func lastAckedBelowWhatWasAcknowledged_isAWarningForIMLink_butExpectedForMQTT() {
        for keeps in [true, false] {
            var router = makeRouter()
            let id = router.newSession()
            for n in 1...5 { _ = router.send(id, "m\(n)") }
            _ = router.linkEstablished(flow: true, serverKeepsAcknowledged: keeps)
            _ = router.completing(router.received(.openOK(OpenOK(session: id, lastAcked: 3))))
            _ = router.linkLost()
            // What an MQTT adapter answers after a restart: it has seen no PUBACK yet.
            _ = router.linkEstablished(flow: true, serverKeepsAcknowledged: keeps)
            let ok = router.completing(router.received(.openOK(OpenOK(session: id, lastAcked: 0))))
            let warnings = ok.compactMap { if case .log(.warning, let text) = $0 { text } else { nil } }
            #expect(warnings.contains { $0.contains("server lost wire seqs 1…3") } == keeps)
            #expect(ok.dataSeqs == [4, 5])
        }
    }

    @Test func windowLimitsUnacknowledgedData_andWindowFramesReplaceIt() {
        var router = makeRouter()
        let id = router.newSession()
        _ = router.linkEstablished(flow: true)
        _ = router.completing(router.received(.openOK(OpenOK(session: id, lastAcked: 0, window: 2))))
        #expect(router.send(id, "1").dataSeqs == [1])
        #expect(router.send(id, "2").dataSeqs == [2])
        #expect(router.send(id, "3").dataSeqs == [])
        let acked = router.completing(router.received(.ack(Ack(session: id, seq: 1))))
        #expect(acked.dataSeqs == [3])
        #expect(acked.ackedEvents == [1])
        #expect(router.send(id, "4").dataSeqs == [])
        #expect(router.completing(router.received(.window(WindowUpdate(session: id, window: 0)))).dataSeqs == [])
        #expect(router.completing(router.received(.window(WindowUpdate(session: id, window: 10)))).dataSeqs == [4])
    }

    @Test func aBacklogPutsAtMostLinkAheadBytesOnTheLink_soALiveSessionIsNotBehindItsWindow() {
        var router = makeRouter()
        let backlog = router.newSession()
        let live = router.newSession()
        let big = String(repeating: "b", count: 300 * 1024)  // two of them pass linkAheadBytes
        for _ in 1...4 { _ = router.send(backlog, big) }
        let up = router.establish()
        #expect(up.dataSeqs == [1, 2])  // not all 4, although the window is 1,024 frames
        #expect(router.send(live, "now").dataSeqs == [1])  // the live message goes out at once
        #expect(router.completing(router.received(.ack(Ack(session: backlog, seq: 1)))).dataSeqs == [3])
        #expect(router.completing(router.received(.ack(Ack(session: backlog, seq: 3)))).dataSeqs == [4])
        _ = router.linkLost()
        #expect(router.establish(lastAcked: { $0 == backlog ? 3 : 1 }).dataSeqs == [4])
    }

    @Test func linkLossMakesInFlightDataUnsent_andTheNextLinkResendsIt() {
        var router = makeRouter()
        let id = router.newSession()
        _ = router.establish()
        _ = router.send(id, "1")
        _ = router.send(id, "2")
        _ = router.completing(router.received(.ack(Ack(session: id, seq: 1))))
        let lost = router.linkLost()
        #expect(lost.sessionStates == [.pending])
        #expect(router.send(id, "3").dataSeqs == [])  // accepted, held for the next link
        let again = router.establish(lastAcked: { _ in 1 })
        #expect(again.dataSeqs == [2, 3])
    }

    @Test func ackBeyondWhatWasSentDropsTheLink() {
        var router = makeRouter()
        let id = router.newSession()
        _ = router.establish()
        _ = router.send(id, "1")
        #expect(router.received(.ack(Ack(session: id, seq: 5))).dropsLink)
        #expect(router.received(.ack(Ack(session: id, seq: 0))).isEmpty)  // old news
    }

    @Test func queueFullAtTheOutboxLimit_andTooLargePayloadsAreRefused() {
        var router = makeRouter(SessionLimits(maxPayloadBytes: 4, outboxMessages: 2))
        let id = router.newSession()
        _ = router.send(id, "1")
        _ = router.send(id, "2")
        #expect(router.clientSend(alice, request: 1, .init(session: id, payload: bytes("3"))).errors == [.queueFull])
        #expect(router.clientSend(alice, request: 1, .init(session: id, payload: bytes("12345"))).errors == [.payloadTooLarge])
        _ = router.establish(lastAcked: { _ in 2 })  // the server had both: room again
        #expect(router.send(id, "3").accepted == [3])
    }

    @Test func storeFullAnswersQueueFull_andTheSeqIsReused() {
        var router = makeRouter()
        let id = router.newSession()
        _ = router.send(id, "1")
        let first = router.clientSend(alice, request: 2, .init(session: id, payload: bytes("2")))
        let second = router.clientSend(alice, request: 3, .init(session: id, payload: bytes("3")))
        #expect(router.completing(first, .failure(.full)).errors == [.queueFull])
        // The store failed the batch as a whole: the later append fails too.
        #expect(router.completing(second, .failure(.full)).errors == [.queueFull])
        #expect(router.send(id, "2 again").accepted == [2])
        #expect(router.table[id]?.outbound.acceptedSeq == 2)
    }

    @Test func higherPrioritySessionsTransmitFirst() {
        var router = makeRouter()
        let low = router.newSession(priority: .low)
        let high = router.newSession(priority: .high)
        let normal = router.newSession(priority: .normal)
        for id in [low, high, normal] { _ = router.send(id, "x") }
        let established = router.establish()
        let order = established.frames.compactMap { if case .data(let d) = $0 { d.session } else { nil } }
        #expect(order == [high, normal, low])
        #expect(established.opens.map(\.session) == [high, normal, low])
    }
}

@Suite struct SessionRouterInboundTests {
    @Test func dataIsStoredBeforeItIsAcked_andAcksAreCoalesced() {
        var router = makeRouter()
        let id = router.newSession()
        _ = router.establish()
        let first = router.received(.data(DataFrame(session: id, seq: 1, body: bytes("a"))))
        #expect(first.ackSeqs.isEmpty)
        #expect(first.persists.count == 1)
        let stored = router.completing(first)
        #expect(stored.schedulesAckFlush)
        #expect(stored.delivered == [1])
        let second = router.data(id, 2)
        #expect(!second.schedulesAckFlush)  // one flush is already due
        #expect(router.flushAcks().ackSeqs == [2])
        #expect(router.flushAcks().ackSeqs.isEmpty)
    }

    @Test func duplicatesAreDiscardedButAckedAgain() {
        var router = makeRouter()
        let id = router.newSession()
        _ = router.establish()
        _ = router.data(id, 1)
        _ = router.data(id, 2)
        let duplicate = router.data(id, 1)
        #expect(duplicate.ackSeqs == [2])
        #expect(duplicate.persists.isEmpty)
        #expect(duplicate.delivered.isEmpty)
        #expect(router.table[id]?.inbound.receivedSeq == 2)
    }

    @Test func aGapIsAProtocolErrorThatDropsTheLink() {
        var router = makeRouter()
        let id = router.newSession()
        _ = router.establish()
        _ = router.data(id, 1)
        let gap = router.data(id, 3)
        #expect(gap.dropsLink)
        #expect(gap.persists.isEmpty)
        #expect(router.table[id]?.inbound.receivedSeq == 1)
    }

    @Test func dataForASessionNotOpenHereIsAnsweredWithUnknownSession() {
        var router = makeRouter()
        _ = router.establish()
        let answer = router.data(12345, 1)
        #expect(answer.frames == [.error(ErrorFrame(session: 12345, code: .unknownSession, message: "session is not open"))])
    }

    @Test func messagesAreDeliveredInOrder_andRedeliveredAfterReattachFromDeliveredSeq() {
        var router = makeRouter()
        let disk = StoredPayloads()
        let id = router.newSession()
        _ = router.establish()
        var delivered: [UInt64] = []
        for seq in 1...4 { delivered += router.data(id, UInt64(seq), disk: disk).delivered }
        #expect(delivered == [1, 2, 3, 4])
        #expect(router.clientAck(alice, request: 0, session: id, seq: 2).persists.count == 1)
        _ = router.clientDisconnected(alice.id)
        #expect(router.data(id, 5, disk: disk).delivered.isEmpty)  // nobody attached: it waits (in the store)
        let attached = router.completing(router.clientOpen(aliceAgain, request: 1, .init(session: id)), disk: disk)
        #expect(attached.opened?.deliveredSeq == 2)
        #expect(attached.delivered == [3, 4, 5])
    }

    @Test func reattachWhileSendsAreBeingStored_opensOnceTheyAre_soSentSeqCountsThem() {
        // A client resuming after OPENED's SENT_SEQ must not send again what its lost connection
        // already handed over: OPENED waits for those SENDs to be stored.
        var router = makeRouter()
        let disk = StoredPayloads()
        let id = router.newSession()
        _ = router.establish()
        _ = router.send(id, "1")
        let inFlight = router.clientSend(alice, request: 8, .init(session: id, payload: bytes("2")))
            + router.clientSend(alice, request: 9, .init(session: id, payload: bytes("3")))
        _ = router.clientDisconnected(alice.id)
        #expect(router.data(id, 1, disk: disk).delivered.isEmpty)
        let attach = router.clientOpen(aliceAgain, request: 1, .init(session: id))
        #expect(attach.opened == nil)
        #expect(router.data(id, 2, disk: disk).delivered.isEmpty)  // no MESSAGE before OPENED either
        let stored = router.completing(inFlight, disk: disk)
        #expect(stored.opened?.sentSeq == 3)
        #expect(stored.delivered == [1, 2])
        // Nothing in flight: OPENED at once.
        _ = router.clientDisconnected(aliceAgain.id)
        #expect(router.clientOpen(alice, request: 2, .init(session: id)).opened?.sentSeq == 3)
    }

    @Test func reattachWaitingForStores_isRefusedWhenTheSessionCloses() {
        var router = makeRouter()
        let id = router.newSession()
        let inFlight = router.clientSend(alice, request: 8, .init(session: id, payload: bytes("1")))
        _ = router.clientDisconnected(alice.id)
        #expect(router.clientOpen(aliceAgain, request: 1, .init(session: id)).opened == nil)
        #expect(router.completing(router.clientClose(aliceAgain, request: 2, session: id)).errors == [.sessionClosed])
        _ = router.completing(inFlight)
    }

    @Test func ackBeyondWhatWasReceivedIsABadRequest() {
        var router = makeRouter()
        let id = router.newSession()
        #expect(router.clientAck(alice, request: 1, session: id, seq: 1).errors == [.badRequest])
    }

    @Test func aClientThatStopsReadingGetsNothingMore_untilItCanReceive() {
        var router = makeRouter(SessionLimits(deliveryBatch: 2))
        let id = router.newSession()
        _ = router.establish()
        #expect(router.data(id, 1).delivered == [1])
        #expect(router.client(alice.id, writable: false).isEmpty)
        #expect(router.data(id, 2).delivered.isEmpty)
        #expect(router.data(id, 3).delivered.isEmpty)
        #expect(router.data(id, 4).delivered.isEmpty)
        let resumed = router.client(alice.id, writable: true)
        #expect(resumed.delivered == [2, 3])  // one batch; the next after the client proves writable again
        #expect(router.client(alice.id, writable: true).delivered == [4])
        #expect(router.client(alice.id, writable: true).delivered.isEmpty)
    }

    @Test func afterABatch_thatSessionsNextFollowsWhileWritable_andABlockedClientGetsAllItsSessionsWhenItDrains() {
        var router = makeRouter(SessionLimits(deliveryBatch: 2))
        let first = router.newSession()
        let second = router.newSession()
        _ = router.establish()
        #expect(router.client(alice.id, writable: false).isEmpty)
        for seq in 1...3 {
            _ = router.data(first, UInt64(seq))
            _ = router.data(second, UInt64(seq))
        }
        // A written batch continues its own session only (no scan of every session per batch).
        let resumed = router.client(alice.id, writable: true)
        #expect(resumed.delivered == [1, 2, 1, 2])
        #expect(router.batchWritten(session: first, client: alice.id, writable: true).delivered == [3])
        #expect(router.batchWritten(session: first, client: alice.id, writable: true).delivered.isEmpty)
        // The channel filled after a batch: nothing more until it drains, then every session.
        #expect(router.batchWritten(session: second, client: alice.id, writable: false).isEmpty)
        #expect(router.data(first, 4).delivered.isEmpty)
        #expect(router.client(alice.id, writable: true).delivered.sorted() == [3, 4])
    }

    @Test func deliveryBatchesAreBoundedInBytes_butAlwaysCarryOneMessage() {
        var router = makeRouter(SessionLimits(deliveryBatchBytes: 5))
        let id = router.newSession()
        _ = router.establish()
        _ = router.client(alice.id, writable: false)
        _ = router.data(id, 1, "abc")
        _ = router.data(id, 2, "de")
        _ = router.data(id, 3, "toolong")
        #expect(router.client(alice.id, writable: true).delivered == [1, 2])
        #expect(router.client(alice.id, writable: true).delivered == [3])
    }

    @Test func fullInboxPausesThatSessionOnly_andReopensBelowHalf() {
        var router = makeRouter(SessionLimits(inboxMessages: 4))
        let slow = router.newSession()
        let other = router.newSession()
        _ = router.establish()
        _ = router.client(alice.id, writable: false)
        for seq in 1...3 { #expect(router.data(slow, UInt64(seq)).windows.isEmpty) }
        let fourth = router.data(slow, 4)
        #expect(fourth.frames.contains(.window(WindowUpdate(session: slow, window: 0))))
        #expect(fourth.sessionStates == [.paused])
        #expect(router.data(other, 1).windows.isEmpty)  // the other session flows on
        #expect(router.table[slow]?.state == .paused)
        // A reconnect keeps the pause: OPEN announces WINDOW 0.
        _ = router.linkLost()
        #expect(router.linkEstablished(flow: true).opens.first { $0.session == slow }?.window == 0)
        _ = router.completing(router.received(.openOK(OpenOK(session: slow, lastAcked: 0))))
        _ = router.completing(router.received(.openOK(OpenOK(session: other, lastAcked: 0))))
        #expect(router.clientAck(alice, request: 0, session: slow, seq: 2).windows.isEmpty)  // 2 left: not below half
        let drained = router.clientAck(alice, request: 0, session: slow, seq: 3)
        #expect(drained.frames.contains(.window(WindowUpdate(session: slow, window: 1024))))
        #expect(drained.sessionStates == [.open])
    }

    /// A burst arriving faster than the store is paused as it arrives: counting only what
    /// was stored, WINDOW 0 came once the store caught up, after the whole burst was taken.
    @Test func aBurstFasterThanTheStore_isPausedAtTheLimit_asItArrives() {
        var router = makeRouter(SessionLimits(inboxMessages: 4))
        let id = router.newSession()
        _ = router.establish()
        var arrivals: [[SessionAction]] = []
        for seq in 1...4 { arrivals.append(router.received(.data(DataFrame(session: id, seq: UInt64(seq), body: bytes("x"))))) }
        #expect(arrivals.prefix(3).allSatisfy { $0.windows.isEmpty })
        #expect(arrivals[3].windows == [0], "WINDOW 0 with the 4th DATA, before any of them is stored")
        #expect(router.table[id]?.state == .paused)
        // Stored afterwards, the inbox is exactly at the limit, and no second WINDOW 0 follows.
        let stored = arrivals.flatMap { router.completing($0) }
        #expect(router.table[id]?.inboxCount == 4)
        #expect(stored.windows == [0])
    }

    @Test func inboundStoreFailureDropsTheLink_andTheResentDataIsTaken() {
        var router = makeRouter()
        let id = router.newSession()
        _ = router.establish()
        let failed = router.completing(router.received(.data(DataFrame(session: id, seq: 1, body: bytes("a")))), .failure(.full))
        // Our store's failure: the link is dropped without blaming the server (no ERROR PROTOCOL).
        #expect(!failed.dropsLink)
        #expect(failed.storeFailures.count == 1)
        #expect(failed.ackSeqs.isEmpty)
        _ = router.linkLost()
        #expect(router.linkEstablished(flow: true).opens.first?.resumeAfter == 0)
        _ = router.completing(router.received(.openOK(OpenOK(session: id, lastAcked: 0))))
        #expect(router.data(id, 1).delivered == [1])
    }
}

@Suite struct SessionRouterServerEventTests {
    @Test func openFailForbiddenFailsThatSessionOnly() {
        var router = makeRouter()
        let refused = router.newSession()
        let fine = router.newSession()
        _ = router.linkEstablished(flow: true)
        let failed = router.received(.openFail(OpenFail(session: refused, code: .forbidden, message: "no")))
        #expect(failed.sessionStates == [.failed])
        #expect(failed.events.contains { if case .sessionState(let s) = $0 { s.code == .upstreamRejected } else { false } })
        #expect(router.clientSend(alice, request: 1, .init(session: refused, payload: bytes("x"))).errors == [.upstreamRejected])
        #expect(router.totals.refused == 1 && router.totals.quarantined == 0)
        #expect(router.completing(router.received(.openOK(OpenOK(session: fine, lastAcked: 0)))).sessionStates == [.open])
        _ = router.linkLost()
        #expect(router.linkEstablished(flow: true).opens.map(\.session) == [fine])
    }

    @Test func openFailSessionClosedPurgesTheSession() {
        var router = makeRouter()
        let id = router.newSession()
        _ = router.send(id, "x")
        _ = router.linkEstablished(flow: true)
        let closed = router.completing(router.received(.openFail(OpenFail(session: id, code: .sessionClosed))))
        #expect(closed.sessionStates == [.closed])
        #expect(closed.persists.contains(.closed(client: nil, request: 0, session: id)))
        #expect(router.table[id] == nil)
        #expect(router.table.closedIDs.contains(id))
    }

    @Test func closeFromTheServerEndsTheSession() {
        var router = makeRouter()
        let id = router.newSession()
        _ = router.establish()
        let closed = router.completing(router.received(.close(Close(session: id))))
        #expect(closed.sessionStates == [.closed])
        #expect(closed.frames.isEmpty)  // no CLOSE echoed back
        #expect(router.table[id] == nil)
    }

    @Test func unknownSessionErrorReopensTheSession_andResendsFromItsOpenOK() {
        var router = makeRouter()
        let id = router.newSession()
        _ = router.establish()
        _ = router.send(id, "1")
        let reopen = router.received(.error(ErrorFrame(session: id, code: .unknownSession)))
        #expect(reopen.opens.map(\.session) == [id])
        #expect(router.completing(router.received(.openOK(OpenOK(session: id, lastAcked: 0)))).dataSeqs == [1])
    }

    @Test func linkStateGoesToClientsWithAnAttachedSession_andActivityToTheEngine() {
        var router = makeRouter()
        let created = router.completing(router.clientOpen(alice, request: 1, .init(service: "echo")))
        #expect(created.contains { if case .sessionsActive(true) = $0 { true } else { false } })
        let id = created.opened!.session
        #expect(router.linkStateChanged(.connected).events == [.linkState(.init(state: .connected))])
        let left = router.clientDisconnected(alice.id)
        #expect(left.contains { if case .sessionsActive(false) = $0 { true } else { false } })
        #expect(router.linkStateChanged(.disconnected).isEmpty)
        #expect(router.table[id] != nil)
    }

    @Test func restoredSessionsResumeWhereTheStoreLeftThem() {
        var router = makeRouter()
        let stored = IndexedSession.restored(77, service: "echo", ackedSeq: 2, deliveredSeq: 1, outbox: [OutboundIndexEntry(seq: 3, bytes: 1)], sentSeq: 3, receivedSeq: 2)
        let disk = StoredPayloads(outbound: [77: [(3, bytes("c"))]], inbound: [77: [(2, bytes("b"))]])
        router.restore(StoreIndex(sessions: [stored, .closed(5)]))
        #expect(router.budget.held == 0)  // start-up reads no payload
        let up = router.linkEstablished(flow: true)
        #expect(router.completing(up + router.received(.openOK(OpenOK(session: 77, lastAcked: 2))), disk: disk).dataSeqs == [3])
        #expect(router.completing(router.clientOpen(alice, request: 1, .init(session: 77)), disk: disk).delivered == [2])
        #expect(router.clientOpen(alice, request: 2, .init(session: 5)).errors == [.sessionClosed])
        #expect(router.data(77, 2).ackSeqs == [2])  // a duplicate of what was stored before the restart
    }
}
