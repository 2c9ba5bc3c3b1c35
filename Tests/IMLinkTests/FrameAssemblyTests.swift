import IMLink
import NIOCore
import NIOEmbedded
import Testing

/// `IMLinkFrameDecoder` gathering large frames (`FrameAssembly`) on a real channel pipeline.
@Suite struct FrameAssemblyTests {
    static let session: UInt64 = 42

    static func data(seq: UInt64, size: Int) -> Frame {
        .data(DataFrame(session: session, seq: seq, body: ByteBuffer(bytes: (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seq)) })))
    }

    static let large = data(seq: 1, size: FrameAssembly.threshold + 100)
    static let small = Frame.ack(Ack(session: session, seq: 1))

    /// Feeds `pieces` one read each and returns the frames that came out.
    static func decode(_ pieces: [ByteBuffer], maxBody: UInt32 = FrameHeader.defaultMaxBody) throws -> [Frame] {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(IMLinkFrameDecoder(maxBody: maxBody)))
        defer { _ = try? channel.finish() }
        var frames: [Frame] = []
        for piece in pieces {
            try channel.writeInbound(piece)
            while let frame = try channel.readInbound(as: Frame.self) { frames.append(frame) }
        }
        return frames
    }

    @Test func largeFrameThenSmall_splitAtEveryByteBoundary_decodeTheSame() throws {
        var stream = Self.large.encoded()
        stream.writeImmutableBuffer(Self.small.encoded())
        for split in 1..<stream.readableBytes {
            let pieces = [stream.getSlice(at: 0, length: split)!, stream.getSlice(at: split, length: stream.readableBytes - split)!]
            let frames = try Self.decode(pieces)
            #expect(frames == [Self.large, Self.small], "split at \(split)")
            if frames != [Self.large, Self.small] { return }
        }
    }

    @Test func eachReadOfALargeFrame_isTakenWhole_notKeptInTheDecodersBuffer() throws {
        let bytes = Self.large.encoded()
        var decoder = IMLinkFrameDecoder()
        var offset = 0
        var frames: [Frame] = []
        while offset < bytes.readableBytes {
            var read = bytes.getSlice(at: offset, length: min(5_000, bytes.readableBytes - offset))!
            offset += read.readableBytes
            if let frame = try decoder.decode(buffer: &read) { frames.append(frame) }
            #expect(read.readableBytes == 0, "every byte of the read at \(offset) is in the gathered frame")
        }
        #expect(frames == [Self.large])
    }

    @Test func manyFrames_inReadsOfVaryingSize_decodeInOrder() throws {
        let frames: [Frame] = (1...40).map { i in
            i % 3 == 0 ? .ack(Ack(session: Self.session, seq: UInt64(i))) : Self.data(seq: UInt64(i), size: [10, 20_000, 70_000, 16_384 - 32][i % 4])
        }
        var stream = ByteBuffer()
        for frame in frames { stream.writeImmutableBuffer(frame.encoded()) }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<5 {
            var pieces: [ByteBuffer] = []
            var offset = 0
            while offset < stream.readableBytes {
                let length = min(Int.random(in: 1...90_000, using: &generator), stream.readableBytes - offset)
                pieces.append(stream.getSlice(at: offset, length: length)!)
                offset += length
            }
            #expect(try Self.decode(pieces) == frames)
        }
    }

    @Test func oversizedHeader_isRefusedBeforeAnythingIsGathered() throws {
        var header = Self.data(seq: 1, size: 70_000).encoded()
        header.moveWriterIndex(to: FrameHeader.size)
        var decoder = IMLinkFrameDecoder(maxBody: 65_536)
        #expect(throws: IMLinkError.frameTooLarge(length: 70_000, limit: 65_536)) { try decoder.decode(buffer: &header) }
        #expect(header.readerIndex == 0)
    }

    @Test func badHeaderOfALargeFrame_isRefusedAtItsHeader() throws {
        var bytes = Self.large.encoded()
        bytes.setInteger(UInt16(0xBEEF), at: 0)
        var decoder = IMLinkFrameDecoder()
        var head = bytes.getSlice(at: 0, length: 100)!
        #expect(throws: IMLinkError.wrongMagic(0xBEEF)) { try decoder.decode(buffer: &head) }
    }

    @Test func corruptBodyOfAGatheredFrame_isRefusedByItsCRC() throws {
        var bytes = Self.large.encoded()
        bytes.setInteger(UInt8(0xFF) ^ bytes.getInteger(at: 5_000, as: UInt8.self)!, at: 5_000)
        var decoder = IMLinkFrameDecoder()
        var first = bytes.getSlice(at: 0, length: 1_000)!
        #expect(try decoder.decode(buffer: &first) == nil)
        #expect(first.readableBytes == 0, "the first read is taken into the gathered frame")
        var rest = bytes.getSlice(at: 1_000, length: bytes.readableBytes - 1_000)!
        #expect {
            try decoder.decode(buffer: &rest)
        } throws: { error in
            if case IMLinkError.crcMismatch = error { return true }
            return false
        }
    }
}
