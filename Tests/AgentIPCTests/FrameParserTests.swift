import AgentIPC
import IMLink
import NIOCore
import Testing

/// The parser's rules beyond the shared vectors: limits, partial input, and
/// record-level checks.
@Suite struct FrameParserTests {
    /// A frame built from raw parts, so tests can write what the encoder never would.
    static func rawFrame(op: UInt16, request: UInt32 = 7, records: [(UInt16, [UInt8])]) -> ByteBuffer {
        var body = ByteBuffer()
        for (tag, value) in records { body.writeTLV(tag: tag, bytes: value) }
        var frame = ByteBuffer()
        frame.writeInteger(UInt32(6 + body.readableBytes))
        frame.writeInteger(op)
        frame.writeInteger(request)
        frame.writeImmutableBuffer(body)
        return frame
    }

    static func u64(_ value: UInt64) -> [UInt8] { withUnsafeBytes(of: value.bigEndian, Array.init) }

    @Test(arguments: 4...10)
    func refusesOversizedFrame_beforeBufferingBody(availableBytes: Int) {
        var buffer = ByteBuffer(bytes: [0x00, 0x11, 0x00, 0x01, 0x00, 0x05, 0x00, 0x00, 0x00, 0x01].prefix(availableBytes))
        #expect(throws: IPCError.frameTooLarge(length: 0x0011_0001, limit: 0x0011_0000)) {
            try IPCFrameParser.parse(&buffer, maxPayload: 1 << 20)
        }
    }

    /// `frameSize`, which the daemon's decoder reads before it gathers a large frame, applies
    /// `parse`'s length rules: nothing is allocated for a frame `parse` would refuse.
    @Test func frameSize_isTheWholeFramesSize_underParsesLengthRules() throws {
        let maxPayload: UInt32 = 16
        let limit = UInt32(IPCFrameHeader.lengthLimit(maxPayload: maxPayload))
        #expect(try IPCFrameParser.frameSize(ByteBuffer(bytes: [0x00, 0x00, 0x01]), maxPayload: maxPayload) == nil)
        var header = ByteBuffer()
        header.writeInteger(limit)
        #expect(try IPCFrameParser.frameSize(header, maxPayload: maxPayload) == 4 + Int(limit))
        #expect(header.readableBytes == 4, "the buffer is only read")
        var above = ByteBuffer()
        above.writeInteger(limit + 1)
        #expect(throws: IPCError.frameTooLarge(length: limit + 1, limit: UInt64(limit))) {
            try IPCFrameParser.frameSize(above, maxPayload: maxPayload)
        }
        var below = ByteBuffer()
        below.writeInteger(IPCFrameHeader.minimumLength - 1)
        #expect(throws: IPCError.lengthBelowMinimum(IPCFrameHeader.minimumLength - 1)) {
            try IPCFrameParser.frameSize(below, maxPayload: maxPayload)
        }
    }

    @Test func acceptsFrameOfExactlyMaxPayloadPlus64KiB_butNotOneByteMore() throws {
        let maxPayload: UInt32 = 16
        let limit = UInt32(IPCFrameHeader.lengthLimit(maxPayload: maxPayload))
        var atLimit = ByteBuffer()
        atLimit.writeInteger(limit)
        #expect(try IPCFrameParser.parse(&atLimit, maxPayload: maxPayload) == nil, "within the limit: waits for the body")
        var aboveLimit = ByteBuffer()
        aboveLimit.writeInteger(limit + 1)
        #expect(throws: IPCError.frameTooLarge(length: limit + 1, limit: UInt64(limit))) {
            try IPCFrameParser.parse(&aboveLimit, maxPayload: maxPayload)
        }
    }

    @Test func largestMaxPayload_doesNotWrapTheLimitAround() throws {
        var buffer = ByteBuffer(bytes: [0xFF, 0xFF, 0xFF, 0xFF])
        #expect(try IPCFrameParser.parse(&buffer, maxPayload: .max) == nil)
    }

    @Test(arguments: [0, 1, 3, 9, 25])
    func partialFrame_returnsNil_andLeavesTheReaderIndex(availableBytes: Int) throws {
        let whole = IPCFrame(request: 3, message: .send(.init(session: 1, payload: ByteBuffer(string: "hi"), ttlMS: 60_000)))
            .encoded()
        var partial = whole.getSlice(at: whole.readerIndex, length: availableBytes)!
        #expect(try IPCFrameParser.parse(&partial) == nil)
        #expect(partial.readerIndex == 0)
        #expect(partial.readableBytes == availableBytes)
    }

    @Test func twoFramesInOneBuffer_comeOutOneAtATime() throws {
        var buffer = IPCFrame(request: 1, message: .ping(.init())).encoded()
        buffer.writeImmutableBuffer(IPCFrame(request: 2, message: .status(.init())).encoded())
        #expect(try IPCFrameParser.parse(&buffer) == IPCFrame(request: 1, message: .ping(.init())))
        #expect(try IPCFrameParser.parse(&buffer) == IPCFrame(request: 2, message: .status(.init())))
        #expect(try IPCFrameParser.parse(&buffer) == nil)
    }

    @Test func unknownOp_isRefusedFromTheHeader_beforeTheBodyArrives() {
        var header = ByteBuffer(bytes: [0x00, 0x00, 0x01, 0x00, 0x07, 0x77, 0x00, 0x00, 0x00, 0x05])
        #expect(throws: IPCError.unknownOp(0x0777, request: 5)) { try IPCFrameParser.parse(&header) }
    }

    @Test func duplicatedKnownRecord_isABadRequest() {
        var frame = Self.rawFrame(op: IPCOp.ack.rawValue, records: [
            (IPCTag.session.rawValue, Self.u64(1)), (IPCTag.seq.rawValue, Self.u64(2)), (IPCTag.seq.rawValue, Self.u64(3)),
        ])
        let expected = IPCError.badRecord(.ack, request: 7, .duplicate(tag: IPCTag.seq.rawValue))
        #expect(throws: expected) { try IPCFrameParser.parse(&frame) }
        #expect(expected.code == .badRequest)
        #expect(expected.request == 7)
        #expect(expected.description == "ACK (request 7): SEQ appears more than once")
    }

    @Test func duplicatedUnknownRecord_isKept_inOrder() throws {
        var frame = Self.rawFrame(op: IPCOp.ping.rawValue, records: [(0x7001, [1]), (0x7001, [2])])
        let expected = ByteBuffer(buffer: frame)
        let decoded = try #require(try IPCFrameParser.parse(&frame))
        guard case .ping(let ping) = decoded.message else { Issue.record("not a PING: \(decoded)"); return }
        #expect(ping.extensions.map(\.value) == [ByteBuffer(bytes: [1]), ByteBuffer(bytes: [2])])
        #expect(decoded.encoded() == expected)
    }

    @Test func missingRequiredRecord_isNamedInTheError() {
        var frame = Self.rawFrame(op: IPCOp.send.rawValue, records: [(IPCTag.session.rawValue, Self.u64(1))])
        let expected = IPCError.missingRecord(.send, request: 7, .payload)
        #expect(throws: expected) { try IPCFrameParser.parse(&frame) }
        #expect(expected.code == .badRequest)
        #expect(expected.description == "SEND (request 7): required record PAYLOAD is missing")
    }

    @Test func openOfANewSession_requiresService() {
        var withoutSession = Self.rawFrame(op: IPCOp.open.rawValue, records: [])
        var withSessionZero = Self.rawFrame(op: IPCOp.open.rawValue, records: [(IPCTag.session.rawValue, Self.u64(0))])
        #expect(throws: IPCError.missingRecord(.open, request: 7, .service)) { try IPCFrameParser.parse(&withoutSession) }
        #expect(throws: IPCError.missingRecord(.open, request: 7, .service)) { try IPCFrameParser.parse(&withSessionZero) }
    }

    @Test func openOfAnExistingSession_needsNoService() throws {
        var frame = Self.rawFrame(op: IPCOp.open.rawValue, records: [(IPCTag.session.rawValue, Self.u64(42))])
        #expect(try IPCFrameParser.parse(&frame) == IPCFrame(request: 7, message: .open(.init(session: 42))))
    }

    @Test func recordOfTheWrongSize_isABadRequest() {
        var frame = Self.rawFrame(op: IPCOp.close.rawValue, records: [(IPCTag.session.rawValue, [0, 1])])
        #expect(throws: IPCError.badRecord(.close, request: 7, .wrongSize(tag: IPCTag.session.rawValue, expected: 8, actual: 2))) {
            try IPCFrameParser.parse(&frame)
        }
    }

    @Test func clientNameOf128Bytes_isAccepted_129IsNot() throws {
        var fits = Self.rawFrame(op: IPCOp.hello.rawValue, records: [
            (IPCTag.ipcVersion.rawValue, [1]), (IPCTag.clientName.rawValue, Array(repeating: 0x61, count: 128)),
        ])
        var tooLong = Self.rawFrame(op: IPCOp.hello.rawValue, records: [
            (IPCTag.ipcVersion.rawValue, [1]), (IPCTag.clientName.rawValue, Array(repeating: 0x61, count: 129)),
        ])
        #expect(try IPCFrameParser.parse(&fits) != nil)
        #expect(throws: IPCError.badRecord(.hello, request: 7,
                                           .lengthOutOfRange(tag: IPCTag.clientName.rawValue, length: 129, allowed: 0...128))) {
            try IPCFrameParser.parse(&tooLong)
        }
    }

    @Test(arguments: [0, 256])
    func serviceOutside1To255Bytes_isABadRequest(length: Int) {
        var frame = Self.rawFrame(op: IPCOp.open.rawValue, records: [(IPCTag.service.rawValue, Array(repeating: 0x61, count: length))])
        #expect(throws: IPCError.badRecord(.open, request: 7,
                                           .lengthOutOfRange(tag: IPCTag.service.rawValue, length: length, allowed: 1...255))) {
            try IPCFrameParser.parse(&frame)
        }
    }

    @Test func textThatIsNotUTF8_isABadRequest() {
        var frame = Self.rawFrame(op: IPCOp.result.rawValue, records: [(IPCTag.json.rawValue, [0x7B, 0xFF, 0x7D])])
        #expect(throws: IPCError.badRecord(.result, request: 7, .invalidUTF8(tag: IPCTag.json.rawValue))) {
            try IPCFrameParser.parse(&frame)
        }
    }

    @Test func priorityAndDurable_outsideTheirDefinedValues_areBadRequests() {
        var priority = Self.rawFrame(op: IPCOp.open.rawValue, records: [
            (IPCTag.service.rawValue, Array("chat".utf8)), (IPCTag.priority.rawValue, [3]),
        ])
        var durable = Self.rawFrame(op: IPCOp.open.rawValue, records: [
            (IPCTag.service.rawValue, Array("chat".utf8)), (IPCTag.durable.rawValue, [2]),
        ])
        #expect(throws: IPCError.invalidValue(.open, request: 7, .priority, value: 3)) { try IPCFrameParser.parse(&priority) }
        #expect(throws: IPCError.invalidValue(.open, request: 7, .durable, value: 2)) { try IPCFrameParser.parse(&durable) }
    }

    @Test func unknownStatesAndCodes_fromANewerDaemon_areKept() throws {
        var frame = Self.rawFrame(op: IPCOp.sessionState.rawValue, request: 0, records: [
            (IPCTag.session.rawValue, Self.u64(9)), (IPCTag.sessionState.rawValue, [7]), (IPCTag.code.rawValue, [0, 99]),
        ])
        let decoded = try #require(try IPCFrameParser.parse(&frame))
        #expect(decoded == .event(.sessionState(.init(session: 9, state: SessionStateValue(rawValue: 7),
                                                       code: IPCErrorCode(rawValue: 99)))))
        #expect(SessionStateValue(rawValue: 7).description == "session state 7")
        #expect(IPCErrorCode(rawValue: 99).description == "CODE_99")
    }

    @Test func recordsOfAnotherOp_areExtensions_notFields() throws {
        var frame = Self.rawFrame(op: IPCOp.ping.rawValue, records: [(IPCTag.session.rawValue, Self.u64(1))])
        let decoded = try #require(try IPCFrameParser.parse(&frame))
        #expect(decoded.message == .ping(.init(extensions: [TLVRecord(tag: IPCTag.session.rawValue, value: ByteBuffer(bytes: Self.u64(1)))])))
    }

    @Test func errorsDescribeThemselvesWithSpecNames() {
        #expect(IPCError.lengthBelowMinimum(2).description == "frame length 2 is below 6, the size of op and request alone")
        #expect(IPCError.frameTooLarge(length: 5, limit: 4).description
            == "frame length 5 is above the limit of 4 bytes (MAX_PAYLOAD + 64 KiB)")
        #expect(IPCError.unknownOp(0x777, request: 1).description == "unknown op 0x777 (request 1)")
        #expect(IPCError.badRecord(.send, request: 1, .overrun(tag: 0x1A, declared: 50, remaining: 1)).description
            == "SEND (request 1): record PAYLOAD declares 50 bytes but only 1 remain in the body")
        #expect(IPCError.invalidValue(.open, request: 2, .priority, value: 9).description
            == "OPEN (request 2): PRIORITY value 9 is not defined by the specification")
    }

    @Test func refusalsBeforeTheHeader_answerWithRequestZero() {
        #expect(IPCError.lengthBelowMinimum(2).request == 0)
        #expect(IPCError.frameTooLarge(length: .max, limit: 1).request == 0)
        #expect(IPCError.frameTooLarge(length: .max, limit: 1).code == .payloadTooLarge)
    }
}
