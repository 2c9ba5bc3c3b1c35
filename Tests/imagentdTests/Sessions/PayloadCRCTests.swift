import AgentIPC
import AgentStore
import IMLink
import NIOCore
import Testing

@testable import IMAgentCore

/// A large payload's CRC-32C is computed once on its way through the daemon: from a SEND's
/// payload, or kept from an inbound DATA frame's check. The store records that one, and the
/// DATA frame's CRC follows from it (`DataFrame.bodyCRC`); a small payload carries none.
@Suite struct PayloadCRCTests {
    static func appendedCRCs(_ actions: [SessionAction]) -> [UInt32?] {
        actions.compactMap { action in
            switch action {
            case .store(.appendOutbound(_, _, _, _, let crc), _, _), .store(.appendInbound(_, _, _, let crc), _, _): crc
            default: nil
            }
        }
    }

    static func sentDataCRCs(_ actions: [SessionAction]) -> [UInt32?] {
        actions.compactMap { action in
            if case .send(.data(let data)) = action { return data.bodyCRC }
            return nil
        }
    }

    @Test func aLargeSendsCRC_goesToTheStore_andToItsDataFrame_once() {
        var router = makeRouter()
        let id = router.newSession()
        _ = router.establish()
        let large = ByteBuffer(repeating: 0x42, count: DataFrame.bodyCRCKeptFrom)
        let small = ByteBuffer(repeating: 0x42, count: DataFrame.bodyCRCKeptFrom - 1)
        let sent = router.completing(router.clientSend(alice, request: 7, .init(session: id, payload: large)))
            + router.completing(router.clientSend(alice, request: 8, .init(session: id, payload: small)))
        #expect(Self.appendedCRCs(sent) == [CRC32C.checksum(large), nil])
        #expect(Self.sentDataCRCs(sent) == [CRC32C.checksum(large), nil])
    }

    @Test func aLargePayloadReadBackFromTheStore_bringsItsCRCToTheLink() throws {
        var budget = MemoryBudget(limit: 1 << 20, uidStoringShare: 1 << 20)
        let record = SessionRecord(id: 1, service: "s", ownerUID: 1000, priority: 1, durable: true, sentSeq: 2, ackedSeq: 0, createdMS: 0)
        var queue = OutboundQueue(restoring: IndexedSession(record: record, outboxCount: 2, outboxBytes: 20_001))
        var tokens = Tokens()
        #expect(queue.beginRead(session: 1, inboundBytes: 0, tokens: &tokens, budget: &budget) != nil)
        let large = ByteBuffer(repeating: 0x17, count: 20_000)
        _ = queue.endRead([OutboundMessage(seq: 1, payload: large, payloadCRC: CRC32C.checksum(large)),
                           OutboundMessage(seq: 2, payload: bytes("x"))], budget: &budget)
        queue.opened(sendWindow: nil)
        var writes: UInt64 = 0
        var crcs: [UInt32?] = []
        queue.transmit(maxFrame: 1 << 20, now: 0, at: .now, linkWrites: &writes, budget: &budget) {
            if case .data(_, _, let crc, _) = $0 { crcs.append(crc) }
        }
        #expect(crcs == [CRC32C.checksum(large), nil])
        #expect(queue.audit() == [])
    }

    @Test func aLargeInboundBodysCheckedCRC_isWhatTheStoreRecords() throws {
        var router = makeRouter()
        let id = router.newSession()
        _ = router.establish()
        let body = ByteBuffer(repeating: 0x99, count: 65_536)
        var wire = Frame.data(DataFrame(session: id, seq: 1, body: body)).encoded()
        let frame = try #require(try FrameParser.parse(&wire, maxBody: 1 << 20))
        let small = Frame.data(DataFrame(session: id, seq: 2, body: bytes("x")))
        let actions = router.completing(router.received(frame)) + router.completing(router.received(small))
        #expect(Self.appendedCRCs(actions) == [CRC32C.checksum(body), nil])
    }
}
