import IMLink
import NIOCore
import NIOEmbedded
import NIOTestUtils
import Testing

@Suite struct FrameCodecTests {
    static let session: UInt64 = 0x0123_4567_89AB_CDEF

    /// One value of every frame type, with every optional record present.
    static let everyFrame: [Frame] = [
        .hello(Hello(features: [.deflate, .flow], agentID: "host-1", agentVersion: "0.1.0", maxFrame: 1 << 20)),
        .helloOK(HelloOK(features: .flow, maxFrame: 65_536)),
        .login(Login(token: ByteBuffer(bytes: [0, 1, 2, 255]), agentID: "host-1")),
        .loginOK(LoginOK(heartbeatMS: 45_000, serverTimeMS: 1_795_000_000_123)),
        .loginFail(LoginFail(code: .overloaded, message: "busy", retryAfterMS: 2_000)),
        .ping(Ping(id: 7, timestampUS: 123)),
        .pong(Ping(id: 7, timestampUS: 123)),
        .goaway(Goaway(code: .shutdown, message: "bye", retryAfterMS: 10, redirect: "[::1]:7443")),
        .error(ErrorFrame(session: 0, code: .protocolError, message: "bad")),
        .error(ErrorFrame(session: session, code: .unknownSession)),
        .open(Open(session: session, service: "chat", resumeAfter: 17, window: 8)),
        .openOK(OpenOK(session: session, lastAcked: 5, window: 16)),
        .openFail(OpenFail(session: session, code: .forbidden, message: "no")),
        .close(Close(session: session, code: .sessionClosed)),
        .close(Close(session: session)),
        .data(DataFrame(session: session, seq: 9, body: ByteBuffer(string: "payload"))),
        .data(DataFrame(session: session, seq: 10, compressed: true, body: Deflate.deflate(ByteBuffer(string: "zzzzzzzz")))),
        .ack(Ack(session: session, seq: 9)),
        .window(WindowUpdate(session: session, window: 0)),
    ]

    @Test func everyFrameType_roundTrips() throws {
        #expect(Set(Self.everyFrame.map(\.type)) == Set(FrameType.allCases))
        for frame in Self.everyFrame {
            var buffer = frame.encoded()
            #expect(try FrameParser.parse(&buffer, maxBody: FrameHeader.defaultMaxBody) == frame)
            #expect(buffer.readableBytes == 0)
        }
    }

    @Test func decoder_handlesByteByByteAndCoalescedInput() throws {
        let pairs = Self.everyFrame.map { ($0.encoded(), [$0]) }
        try ByteToMessageDecoderVerifier.verifyDecoder(inputOutputPairs: pairs) { IMLinkFrameDecoder() }
    }

    @Test func encoderAndDecoder_onAChannel_leaveItClean() throws {
        let channel = EmbeddedChannel(handlers: [
            ByteToMessageHandler(IMLinkFrameDecoder()), MessageToByteHandler(IMLinkFrameEncoder()),
        ])
        for frame in Self.everyFrame {
            try channel.writeOutbound(frame)
            let bytes = try #require(try channel.readOutbound(as: ByteBuffer.self))
            try channel.writeInbound(bytes)
            #expect(try channel.readInbound(as: Frame.self) == frame)
        }
        #expect(try channel.finish().isClean)
    }

    @Test func partialFrame_returnsNil_andKeepsTheReaderIndex() throws {
        let bytes = Frame.open(Open(session: Self.session, service: "chat", resumeAfter: 0)).encoded()
        for cut in [0, 1, 31, 32, bytes.readableBytes - 1] {
            var partial = bytes.getSlice(at: 0, length: cut)!
            #expect(try FrameParser.parse(&partial, maxBody: 1 << 20) == nil)
            #expect(partial.readableBytes == cut)
        }
    }

    @Test func linkFrameWithSession_andSessionFrameWithout_areRefused() {
        var hello = Frame.ping(Ping(id: 1, timestampUS: 1)).encoded()
        hello.setInteger(UInt64(5), at: 8)
        resign(&hello)
        #expect(throws: IMLinkError.wrongSession(.ping, session: 5)) { _ = try FrameParser.parse(&hello, maxBody: 1 << 20) }

        var data = Frame.data(DataFrame(session: 1, seq: 1, body: ByteBuffer())).encoded()
        data.setInteger(UInt64(0), at: 8)
        resign(&data)
        #expect(throws: IMLinkError.wrongSession(.data, session: 0)) { _ = try FrameParser.parse(&data, maxBody: 1 << 20) }
    }

    @Test func compressedFlagOnAControlFrame_isRefused() {
        var frame = Frame.ack(Ack(session: 1, seq: 1)).encoded()
        frame.setInteger(UInt16(1), at: 4)
        resign(&frame)
        #expect(throws: IMLinkError.compressedControlFrame(.ack)) { _ = try FrameParser.parse(&frame, maxBody: 1 << 20) }
    }

    @Test func repeatedKnownRecord_isRefused_repeatedUnknownRecordIsKept() throws {
        var body = ByteBuffer()
        body.writeTLV(tag: 0x7777, string: "a")
        body.writeTLV(tag: 0x7777, string: "b")
        body.writeTLV(tag: RecordTag.lastAcked.rawValue, integer: UInt64(3))
        var good = frameBytes(type: .openOK, session: 1, body: body)
        let frame = try FrameParser.parse(&good, maxBody: 1 << 20)
        guard case .openOK(let ok) = frame else { Issue.record("not OPEN_OK: \(String(describing: frame))"); return }
        #expect(ok.lastAcked == 3)
        #expect(ok.extensions.count == 2)

        body.writeTLV(tag: RecordTag.lastAcked.rawValue, integer: UInt64(4))
        var bad = frameBytes(type: .openOK, session: 1, body: body)
        #expect(throws: IMLinkError.badRecord(.openOK, .duplicate(tag: RecordTag.lastAcked.rawValue))) {
            _ = try FrameParser.parse(&bad, maxBody: 1 << 20)
        }
    }

    @Test func missingRequiredRecord_andBadText_areRefused() {
        var empty = frameBytes(type: .open, session: 1, body: ByteBuffer())
        #expect(throws: IMLinkError.badRecord(.open, .missing(tag: RecordTag.service.rawValue))) {
            _ = try FrameParser.parse(&empty, maxBody: 1 << 20)
        }
        var body = ByteBuffer()
        body.writeTLV(tag: RecordTag.service.rawValue, bytes: [0xC3, 0x28])
        body.writeTLV(tag: RecordTag.resumeAfter.rawValue, integer: UInt64(0))
        var badUTF8 = frameBytes(type: .open, session: 1, body: body)
        #expect(throws: IMLinkError.badRecord(.open, .invalidUTF8(tag: RecordTag.service.rawValue))) {
            _ = try FrameParser.parse(&badUTF8, maxBody: 1 << 20)
        }
    }

    @Test func everyErrorMapsToAWireCode() {
        #expect(IMLinkError.frameTooLarge(length: 2, limit: 1).code == .frameTooLarge)
        #expect(IMLinkError.crcMismatch(received: 1, computed: 2).code == .protocolError)
        #expect(IMLinkError.badRecord(.open, .missing(tag: 0x20)).description == "OPEN: required record SERVICE is missing")
    }

    @Test func inflate_refusesBombs_andCorruptStreams() throws {
        let big = ByteBuffer(repeating: 0x61, count: 1 << 20)
        let compressed = Deflate.deflate(big)
        #expect(compressed.readableBytes < 4096)
        #expect(try Deflate.inflate(compressed, limit: 1 << 20) == big)
        #expect(throws: Deflate.Failure.tooLarge(limit: 65_536)) { _ = try Deflate.inflate(compressed, limit: 65_536) }
        #expect(throws: Deflate.Failure.corrupt) { _ = try Deflate.inflate(ByteBuffer(bytes: [0xFF, 0xFF, 0xFF]), limit: 1024) }
        #expect(throws: Deflate.Failure.corrupt) { _ = try Deflate.inflate(compressed.getSlice(at: 0, length: 10)!, limit: 1 << 20) }
    }
    /// A DATA frame whose body is left out (a gathering write) gives the same bytes, CRC
    /// included, as one encoded whole; smaller bodies and other frames are written whole.
    @Test func aDataFrameEncodedLeavingItsBody_isTheSameBytesAsWhole() throws {
        for size in [0, 15, 16, 65_536] {
            let body = ByteBuffer(repeating: 0x5A, count: size)
            let frame = Frame.data(DataFrame(session: Self.session, seq: 3, body: body))
            var head = ByteBuffer()
            let left = frame.encode(into: &head, leavingBodyFrom: 16)
            #expect(left == (size >= 16 ? body : nil), "\(size)")
            #expect(head.readableBytes == (size >= 16 ? FrameHeader.size : FrameHeader.size + size))
            if let left { head.writeImmutableBuffer(left) }
            #expect(head == frame.encoded(), "\(size)")
        }
        var ping = ByteBuffer()
        #expect(Frame.ping(Ping(id: 1, timestampUS: 2)).encode(into: &ping, leavingBodyFrom: 0) == nil)
        #expect(ping == Frame.ping(Ping(id: 1, timestampUS: 2)).encoded())
    }


    /// A DATA frame made with its body's CRC known gives the same bytes; a parsed frame keeps a
    /// large body's CRC (not a small one's), a new body forgets it, and frames compare without it.
    @Test func aLargeBodysCRC_isKeptBothWays_andIsNotPartOfTheFrame() throws {
        for size in [100, DataFrame.bodyCRCKeptFrom - 1, DataFrame.bodyCRCKeptFrom, 65_536] {
            let body = ByteBuffer(bytes: (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7) })
            let plain = Frame.data(DataFrame(session: Self.session, seq: 4, body: body))
            let known = DataFrame(session: Self.session, seq: 4, body: body, bodyCRC: CRC32C.checksum(body))
            #expect(Frame.data(known).encoded() == plain.encoded(), "\(size)")
            #expect(Frame.data(known) == plain)

            var wire = plain.encoded()
            guard case .data(var parsed) = try FrameParser.parse(&wire, maxBody: 1 << 20) else {
                Issue.record("not DATA")
                continue
            }
            #expect(parsed.bodyCRC == (size >= DataFrame.bodyCRCKeptFrom ? CRC32C.checksum(body) : nil), "\(size)")
            parsed.body = ByteBuffer(string: "other")
            #expect(parsed.bodyCRC == nil)
        }
        // A corrupt large body is still refused: the kept CRC is the checked one.
        var wire = Frame.data(DataFrame(session: Self.session, seq: 5, body: ByteBuffer(repeating: 1, count: 65_536))).encoded()
        wire.setInteger(UInt8(2), at: wire.readerIndex + FrameHeader.size + 40_000)
        #expect(throws: IMLinkError.self) { _ = try FrameParser.parse(&wire, maxBody: 1 << 20) }
    }
}

/// A frame with a hand-made body and a correct CRC.
private func frameBytes(type: FrameType, session: UInt64, body: ByteBuffer) -> ByteBuffer {
    var buffer = ByteBuffer()
    buffer.writeInteger(FrameHeader.magic)
    buffer.writeInteger(FrameHeader.version)
    buffer.writeInteger(type.rawValue)
    buffer.writeInteger(UInt16(0))
    buffer.writeInteger(UInt16(0))
    buffer.writeInteger(session)
    buffer.writeInteger(UInt64(0))
    buffer.writeInteger(UInt32(body.readableBytes))
    buffer.writeInteger(UInt32(0))
    buffer.writeImmutableBuffer(body)
    resign(&buffer)
    return buffer
}

/// Recomputes the CRC of a frame whose header a test has edited.
private func resign(_ buffer: inout ByteBuffer) {
    var crc = CRC32C()
    crc.update(buffer.getSlice(at: 0, length: 28)!)
    crc.update(buffer.getSlice(at: 32, length: buffer.readableBytes - 32)!)
    buffer.setInteger(crc.value, at: 28)
}
