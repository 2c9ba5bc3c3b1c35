import AgentIPC
import IMLink
import NIOCore
import Testing

/// Every vector of `shared/vectors/ipc.json`, byte for byte.
@Suite struct SharedVectorTests {
    static let vectors: SharedVectors = {
        do { return try SharedVectors.load() } catch {
            fatalError("cannot read \(SharedVectors.url.path): \(error)")
        }
    }()

    @Test func sharedVectorsArePresent() {
        #expect(Self.vectors.valid.count >= 13)
        #expect(Self.vectors.invalid.count >= 4)
    }

    @Test(arguments: vectors.valid)
    func validVector_decodesToItsFields_andReencodesToTheSameBytes(_ vector: SharedVectors.Valid) throws {
        var buffer = try #require(ByteBuffer(hex: vector.hex))
        let frame = try #require(try IPCFrameParser.parse(&buffer))
        #expect(buffer.readableBytes == 0, "the whole vector is one frame")
        #expect(frame.message.op.description == vector.op)
        #expect(frame.request == vector.request)
        #expect(frame.message.specFields == vector.fields)
        #expect(frame.encoded().hexString == vector.hex)
    }

    /// What each invalid vector must be refused with; a vector added to the
    /// file without an entry here fails `invalidVector_…` until it gets one.
    static let expectedErrors: [String: IPCError] = [
        "short_frame": .lengthBelowMinimum(2),
        "huge_length": .frameTooLarge(length: 0xFFFF_FFFF, limit: (1 << 20) + 64 * 1024),
        "tlv_overrun": .badRecord(.send, request: 1, .overrun(tag: IPCTag.payload.rawValue, declared: 0x32, remaining: 1)),
        "unknown_op": .unknownOp(0x0777, request: 1),
    ]

    @Test(arguments: vectors.invalid)
    func invalidVector_isRefusedWithItsError_andClosesTheConnection(_ vector: SharedVectors.Invalid) throws {
        let expected = try #require(Self.expectedErrors[vector.name], "no expected error for vector \(vector.name)")
        var buffer = try #require(ByteBuffer(hex: vector.hex))
        let untouched = buffer
        #expect(throws: expected) { try IPCFrameParser.parse(&buffer) }
        #expect(buffer == untouched)
        #expect(expected.closesConnection)
        #expect(expected.code == (vector.name == "huge_length" ? .payloadTooLarge : .badRequest))
    }
}
