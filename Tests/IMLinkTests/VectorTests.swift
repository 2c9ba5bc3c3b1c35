import IMLink
import NIOCore
import Testing

/// Every vector of `../shared/vectors/imlink.json`: valid ones decode to the
/// stated values and re-encode to the same bytes; invalid ones are refused
/// with the stated error.
@Suite struct VectorTests {
    @Test func crc32cMatchesTheCheckValue() {
        let vectors = IMLinkVectors.shared
        #expect(CRC32C.checksum(Array(vectors.crcCheckInput.utf8)) == vectors.crcCheckValue)
    }

    @Test(arguments: IMLinkVectors.shared.valid.map(\.name))
    func validVector_decodesToItsFields_andReencodesByteForByte(name: String) throws {
        let vector = IMLinkVectors.shared.valid.first { $0.name == name }!
        var buffer = ByteBuffer(bytes: vector.bytes)
        let frame = try #require(try FrameParser.parse(&buffer, maxBody: FrameHeader.defaultMaxBody))
        #expect(buffer.readableBytes == 0)

        #expect(frame.type.name == vector.type)
        #expect(frame.session == vector.session)
        if case .data(let data) = frame {
            #expect(data.seq == vector.seq)
            #expect(data.compressed == (vector.flags & 1 != 0))
            let payload = data.compressed ? try Deflate.inflate(data.body, limit: 1 << 20) : data.body
            #expect(hexString(payload) == vector.payloadHex)
        } else {
            #expect(specFields(of: frame) == vector.fields)
            #expect(headerSeq(of: frame) == vector.seq)
        }
        #expect(Array(frame.encoded().readableBytesView) == vector.bytes)
    }

    @Test(arguments: IMLinkVectors.shared.invalid.map(\.name))
    func invalidVector_isRefusedWithItsError(name: String) throws {
        let vector = IMLinkVectors.shared.invalid.first { $0.name == name }!
        var buffer = ByteBuffer(bytes: vector.bytes)
        #expect(throws: IMLinkError.self) { _ = try FrameParser.parse(&buffer, maxBody: FrameHeader.defaultMaxBody) }
        do {
            _ = try FrameParser.parse(&buffer, maxBody: FrameHeader.defaultMaxBody)
        } catch {
            #expect(Self.matches(error, vectorName: name), "\(name) (\(vector.error)) gave: \(error)")
        }
    }

    /// The invalid vectors' names say which error each must produce.
    static func matches(_ error: IMLinkError, vectorName: String) -> Bool {
        switch (vectorName, error) {
        case ("bad_crc", .crcMismatch), ("bad_magic", .wrongMagic), ("bad_version", .wrongVersion),
             ("reserved_flag", .reservedFlagSet), ("unknown_type", .unknownFrameType),
             ("length_too_large", .frameTooLarge),
             ("tlv_overrun", .badRecord(.openOK, .overrun)),
             ("tlv_wrong_size", .badRecord(.openOK, .wrongSize(tag: RecordTag.lastAcked.rawValue, expected: 8, actual: 4))):
            true
        default:
            false
        }
    }

    @Test func oversizedLength_isRefusedFromTheHeaderAlone() {
        // Only the 32 header bytes of `length_too_large` exist: no body was ever sent.
        let vector = IMLinkVectors.shared.invalid.first { $0.name == "length_too_large" }!
        #expect(vector.bytes.count == FrameHeader.size)
        var buffer = ByteBuffer(bytes: vector.bytes)
        #expect(throws: IMLinkError.frameTooLarge(length: 0xFFFF_FFF0, limit: FrameHeader.defaultMaxBody)) {
            _ = try FrameParser.parse(&buffer, maxBody: FrameHeader.defaultMaxBody)
        }
    }
}

private func headerSeq(of frame: Frame) -> UInt64 {
    switch frame {
    case .ping(let ping), .pong(let ping): ping.id
    case .ack(let ack): ack.seq
    case .data(let data): data.seq
    default: 0
    }
}

/// The frame's known records, named as in the specification, as text.
private func specFields(of frame: Frame) -> [String: String] {
    var fields: [String: String] = [:]
    func set(_ name: String, _ value: (any BinaryInteger)?) { if let value { fields[name] = String(value) } }
    func set(_ name: String, _ value: String?) { if let value { fields[name] = value } }
    switch frame {
    case .hello(let f):
        set("VERSION_MIN", f.versionMin); set("VERSION_MAX", f.versionMax); set("FEATURES", f.features.rawValue)
        set("AGENT_ID", f.agentID); set("AGENT_VERSION", f.agentVersion); set("MAX_FRAME", f.maxFrame)
    case .helloOK(let f):
        set("VERSION", f.version); set("FEATURES", f.features.rawValue); set("MAX_FRAME", f.maxFrame)
    case .login(let f):
        set("TOKEN", hexString(f.token)); set("AGENT_ID", f.agentID)
    case .loginOK(let f):
        set("HEARTBEAT_MS", f.heartbeatMS); set("SERVER_TIME_MS", f.serverTimeMS)
    case .loginFail(let f):
        set("CODE", f.code.rawValue); set("MESSAGE", f.message); set("RETRY_AFTER_MS", f.retryAfterMS)
    case .ping(let f), .pong(let f):
        set("TIMESTAMP_US", f.timestampUS)
    case .goaway(let f):
        set("CODE", f.code.rawValue); set("MESSAGE", f.message); set("RETRY_AFTER_MS", f.retryAfterMS); set("REDIRECT", f.redirect)
    case .error(let f):
        set("CODE", f.code.rawValue); set("MESSAGE", f.message)
    case .open(let f):
        set("SERVICE", f.service); set("RESUME_AFTER", f.resumeAfter); set("WINDOW", f.window)
    case .openOK(let f):
        set("LAST_ACKED", f.lastAcked); set("WINDOW", f.window)
    case .openFail(let f):
        set("CODE", f.code.rawValue); set("MESSAGE", f.message)
    case .close(let f):
        set("CODE", f.code?.rawValue)
    case .window(let f):
        set("WINDOW", f.window)
    case .ack, .data:
        break
    }
    return fields
}
