import NIOCore
import Testing

@testable import IMAgentCore

/// The messages a session has handed to the store: counted in seq order only, whatever
/// order the store completes them in; a failure drops the failed seq and all after it.
@Suite struct StoringMessagesTests {
    func entry(_ text: String, token: UInt64) -> StoringMessages.Entry {
        .init(payload: ByteBuffer(string: text), token: token)
    }

    @Test func completionsOutOfOrder_areCountedInSeqOrder() {
        var storing = StoringMessages(after: 10)
        for seq in UInt64(11)...13 { storing.append(seq, entry("m\(seq)", token: seq * 100)) }
        #expect(storing.count == 3)
        #expect(storing[12]?.token == 1_200)
        #expect(storing[10] == nil && storing[14] == nil)

        storing.markStored(13)
        #expect(storing.popStored() == nil)  // 11 is not stored yet
        storing.markStored(11)
        #expect(storing.popStored()?.token == 1_100)
        #expect(storing.popStored() == nil)  // 12 is not stored yet
        storing.markStored(12)
        #expect(storing.popStored()?.token == 1_200)
        #expect(storing.popStored()?.token == 1_300)
        #expect(storing.isEmpty)

        storing.append(14, entry("m14", token: 1_400))
        #expect(storing[14]?.payload == ByteBuffer(string: "m14"))
    }

    @Test func aFailure_dropsTheFailedSeqAndEveryLaterOne_andTheSeqIsAppendedAgain() {
        var storing = StoringMessages(after: 0)
        for seq in UInt64(1)...4 { storing.append(seq, entry(String(repeating: "x", count: Int(seq)), token: seq)) }
        #expect(storing.removeFrom(3).map(\.payload.readableBytes) == [4, 3])
        #expect(storing.count == 2)
        #expect(storing[3] == nil)
        #expect(storing.removeFrom(9).isEmpty)

        storing.append(3, entry("again", token: 30))
        #expect(storing[3]?.token == 30)
        #expect(storing.removeFrom(1).map(\.payload.readableBytes) == [5, 2, 1])
        #expect(storing.isEmpty)
        storing.append(1, entry("first again", token: 10))
        #expect(storing[1]?.token == 10)
    }
}
