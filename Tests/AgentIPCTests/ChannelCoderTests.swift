import AgentIPC
import NIOCore
import NIOEmbedded
import NIOTestUtils
import Testing

/// The codec on a channel: NIO's verifier splits the input every way it can.
@Suite struct ChannelCoderTests {
    @Test func decoderYieldsEveryVectorFrame_howeverTheBytesArrive() throws {
        let pairs = try SharedVectorTests.vectors.valid.map { vector -> (ByteBuffer, [IPCFrame]) in
            var buffer = try #require(ByteBuffer(hex: vector.hex))
            let frame = try #require(try IPCFrameParser.parse(&buffer))
            return (try #require(ByteBuffer(hex: vector.hex)), [frame])
        }
        try ByteToMessageDecoderVerifier.verifyDecoder(inputOutputPairs: pairs) { IPCFrameDecoder() }
    }

    @Test func decoderYieldsEveryMessageType_howeverTheBytesArrive() throws {
        let pairs = IPCOp.allCases.map { op -> (ByteBuffer, [IPCFrame]) in
            let frame = IPCFrame(request: UInt32(op.rawValue), message: RoundTripTests.fullMessage(op))
            return (frame.encoded(), [frame])
        }
        try ByteToMessageDecoderVerifier.verifyDecoder(inputOutputPairs: pairs) { IPCFrameDecoder() }
    }

    @Test func encoderWritesTheSameBytesAsEncode() throws {
        let channel = EmbeddedChannel(handler: MessageToByteHandler(IPCFrameEncoder()))
        let frame = IPCFrame(request: 77, message: .ping(.init()))
        try channel.writeOutbound(frame)
        #expect(try channel.readOutbound(as: ByteBuffer.self) == frame.encoded())
        #expect(try channel.finish().isClean)
    }

    @Test func decoderOnAChannel_refusesAnOversizedFrame_fromItsLengthAlone() throws {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(IPCFrameDecoder(maxPayload: 100)))
        let length = UInt32(IPCFrameHeader.lengthLimit(maxPayload: 100) + 1)
        var buffer = channel.allocator.buffer(capacity: 4)
        buffer.writeInteger(length)
        #expect(throws: IPCError.frameTooLarge(length: length, limit: UInt64(length - 1))) {
            try channel.writeInbound(buffer)
        }
        _ = try? channel.finish()
    }
}
