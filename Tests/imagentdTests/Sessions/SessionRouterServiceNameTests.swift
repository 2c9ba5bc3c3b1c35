import AgentIPC
import AgentStore
import IMLink
import NIOCore
import Testing

@testable import IMAgentCore

/// SERVICE must be a name every MQTT 5 broker accepts as a topic level, on either upstream
/// (`ServiceName`): refused at OPEN, and a stored session from before the rule never reaches the link.
@Suite struct SessionRouterServiceNameTests {
    /// Swift's lexer takes no noncharacter in a literal: those are built from their values.
    static let refused = ["a/b", "a+", "#", "bell\u{7}", "\u{1B}]0;title\u{7}\u{1B}[31m", "del\u{7F}", "c1\u{9B}"]
        + [0xFDD0, 0xFFFE, 0x10FFFF].map { "non" + String(Character(Unicode.Scalar(UInt32($0))!)) }

    @Test(arguments: refused)
    func openOfARefusableName_isBadRequest_storesNothing_andTheConnectionGoesOn(service: String) {
        var router = makeRouter()
        _ = router.linkEstablished(flow: true)
        let refused = router.clientOpen(alice, request: 1, .init(service: service))
        #expect(refused.errors == [.badRequest])
        #expect(refused.persists.isEmpty && refused.opens.isEmpty)
        let text = refused.compactMap { if case .fail(_, _, _, let text) = $0 { text } else { nil } }.first ?? ""
        #expect(text.hasPrefix("SERVICE \"") && text.contains("imagent-ipc(7)"))
        #expect(!text.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) })
        // The same client goes on: a valid name opens.
        #expect(router.completing(router.clientOpen(alice, request: 2, .init(service: "echo é"))).opened != nil)
    }

    @Test func aStoredSessionWithARefusableName_isFailedAtStartUp_neverOpened_andCanBeClosed() {
        var router = makeRouter()
        let bad = IndexedSession.restored(8, service: "x\u{1}", ackedSeq: 0, deliveredSeq: 0, outbox: [OutboundIndexEntry(seq: 1, bytes: 1)], sentSeq: 1, receivedSeq: 0)
        let good = IndexedSession.restored(9, service: "echo", ackedSeq: 0, deliveredSeq: 0, outbox: [], sentSeq: 0, receivedSeq: 0)
        let warnings = router.restore(StoreIndex(sessions: [bad, good]))
        #expect(warnings.count == 1)
        #expect(warnings.first?.contains("session 8 of uid 1000") == true)
        #expect(warnings.first?.contains("\\u{1}") == true && warnings.first?.contains("U+0001 is a control character") == true)
        #expect(router.table[8]?.state == .failed)
        let up = router.linkEstablished(flow: true)
        #expect(up.opens.map(\.session) == [9])
        // Its owner sees why, and cannot send; closing it tells the link nothing.
        let attached = router.completing(router.clientOpen(alice, request: 1, .init(session: 8)))
        #expect(attached.opened?.sessionState == .failed)
        #expect(router.clientSend(alice, request: 2, .init(session: 8, payload: bytes("x"))).errors == [.upstreamRejected])
        let closed = router.completing(router.clientClose(alice, request: 3, session: 8))
        #expect(closed.frames.isEmpty)
        #expect(router.table[8] == nil)
    }
}
