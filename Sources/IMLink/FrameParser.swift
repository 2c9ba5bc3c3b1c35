import NIOCore

/// Incremental frame parsing, independent of any channel: call `parse` with
/// the bytes received so far; it consumes one whole frame or nothing.
public enum FrameParser {
    /// The size of the frame at the front of `buffer`, header and body, once its 32-byte
    /// header is there (nil before). The header is validated — including `length` against
    /// `maxBody` — so an oversized frame is refused before any of its body is buffered.
    public static func frameSize(_ buffer: ByteBuffer, maxBody: UInt32) throws(IMLinkError) -> Int? {
        guard buffer.readableBytes >= FrameHeader.size else { return nil }
        let start = buffer.readerIndex
        let magic = buffer.getInteger(at: start, as: UInt16.self)!
        let version = buffer.getInteger(at: start + 2, as: UInt8.self)!
        let typeByte = buffer.getInteger(at: start + 3, as: UInt8.self)!
        let flags = buffer.getInteger(at: start + 4, as: UInt16.self)!
        let length = buffer.getInteger(at: start + FrameHeader.lengthOffset, as: UInt32.self)!

        guard magic == FrameHeader.magic else { throw .wrongMagic(magic) }
        guard version == FrameHeader.version else { throw .wrongVersion(version) }
        guard FrameType(rawValue: typeByte) != nil else { throw .unknownFrameType(typeByte) }
        guard flags & ~FrameHeader.compressedFlag == 0 else { throw .reservedFlagSet(flags: flags) }
        guard length <= maxBody else { throw .frameTooLarge(length: length, limit: maxBody) }
        return FrameHeader.size + Int(length)
    }

    /// Reads one frame from the front of `buffer`.
    ///
    /// Returns nil, leaving `buffer` untouched, while the frame is incomplete.
    /// The header is validated (`frameSize`) as soon as its 32 bytes are there.
    public static func parse(_ buffer: inout ByteBuffer, maxBody: UInt32) throws(IMLinkError) -> Frame? {
        guard let size = try frameSize(buffer, maxBody: maxBody), buffer.readableBytes >= size else { return nil }
        let start = buffer.readerIndex
        let type = FrameType(rawValue: buffer.getInteger(at: start + 3, as: UInt8.self)!)!
        let flags = buffer.getInteger(at: start + 4, as: UInt16.self)!
        let session = buffer.getInteger(at: start + 8, as: UInt64.self)!
        let seq = buffer.getInteger(at: start + 16, as: UInt64.self)!
        let length = size - FrameHeader.size
        let crc = buffer.getInteger(at: start + FrameHeader.crcOffset, as: UInt32.self)!

        // A large DATA body's CRC is computed apart and kept (the frame's follows from it): the
        // store records it for the payload's copy on disk without reading the payload again.
        let keepsBodyCRC = type == .data && length >= DataFrame.bodyCRCKeptFrom
        var header = CRC32C()
        var body = CRC32C()
        buffer.withUnsafeReadableBytes { bytes in
            header.update(UnsafeRawBufferPointer(rebasing: bytes[0..<FrameHeader.crcOffset]))
            if keepsBodyCRC {
                body.update(UnsafeRawBufferPointer(rebasing: bytes[FrameHeader.size..<size]))
            } else {
                header.update(UnsafeRawBufferPointer(rebasing: bytes[FrameHeader.size..<size]))
            }
        }
        let computed = keepsBodyCRC ? CRC32C.combine(header.value, body.value, secondLength: length) : header.value
        guard computed == crc else { throw .crcMismatch(received: crc, computed: computed) }

        switch (type.sessionRule, session) {
        case (.zero, 0), (.nonZero, 1...), (.any, _): break
        case (.zero, _), (.nonZero, _): throw .wrongSession(type, session: session)
        }
        let compressed = flags & FrameHeader.compressedFlag != 0
        guard !compressed || type == .data else { throw .compressedControlFrame(type) }

        buffer.moveReaderIndex(forwardBy: FrameHeader.size)
        let payload = buffer.readSlice(length: length)!
        if type == .data {
            return .data(DataFrame(session: session, seq: seq, compressed: compressed, body: payload,
                                   bodyCRC: keepsBodyCRC ? body.value : nil))
        }
        do {
            return try controlFrame(type, session: session, seq: seq, body: payload)
        } catch {
            throw .badRecord(type, error)
        }
    }

    private static func controlFrame(_ type: FrameType, session: UInt64, seq: UInt64, body: ByteBuffer) throws(TLVError) -> Frame {
        let fields = try TLVFields(body: body, known: type.knownTags.map(\.rawValue))
        let ext = fields.extensions
        switch type {
        case .hello:
            return .hello(Hello(
                versionMin: try fields.requiredInteger(RecordTag.versionMin.rawValue),
                versionMax: try fields.requiredInteger(RecordTag.versionMax.rawValue),
                features: Features(rawValue: try fields.requiredInteger(RecordTag.features.rawValue)),
                agentID: try fields.requiredString(RecordTag.agentID.rawValue, length: 1...128),
                agentVersion: try fields.string(RecordTag.agentVersion.rawValue),
                maxFrame: try fields.requiredInteger(RecordTag.maxFrame.rawValue),
                extensions: ext))
        case .helloOK:
            return .helloOK(HelloOK(
                version: try fields.requiredInteger(RecordTag.version.rawValue),
                features: Features(rawValue: try fields.requiredInteger(RecordTag.features.rawValue)),
                maxFrame: try fields.requiredInteger(RecordTag.maxFrame.rawValue),
                extensions: ext))
        case .login:
            return .login(Login(
                token: try fields.requiredBytes(RecordTag.token.rawValue),
                agentID: try fields.requiredString(RecordTag.agentID.rawValue, length: 1...128),
                extensions: ext))
        case .loginOK:
            return .loginOK(LoginOK(
                heartbeatMS: try fields.integer(RecordTag.heartbeatMS.rawValue),
                serverTimeMS: try fields.integer(RecordTag.serverTimeMS.rawValue),
                extensions: ext))
        case .loginFail:
            return .loginFail(LoginFail(
                code: WireCode(rawValue: try fields.requiredInteger(RecordTag.code.rawValue)),
                message: try fields.string(RecordTag.message.rawValue),
                retryAfterMS: try fields.integer(RecordTag.retryAfterMS.rawValue),
                extensions: ext))
        case .ping, .pong:
            let ping = Ping(id: seq, timestampUS: try fields.requiredInteger(RecordTag.timestampUS.rawValue), extensions: ext)
            return type == .ping ? .ping(ping) : .pong(ping)
        case .goaway:
            return .goaway(Goaway(
                code: WireCode(rawValue: try fields.requiredInteger(RecordTag.code.rawValue)),
                message: try fields.string(RecordTag.message.rawValue),
                retryAfterMS: try fields.integer(RecordTag.retryAfterMS.rawValue),
                redirect: try fields.string(RecordTag.redirect.rawValue, length: 1...1024),
                extensions: ext))
        case .error:
            return .error(ErrorFrame(
                session: session,
                code: WireCode(rawValue: try fields.requiredInteger(RecordTag.code.rawValue)),
                message: try fields.string(RecordTag.message.rawValue),
                extensions: ext))
        case .open:
            return .open(Open(
                session: session,
                service: try fields.requiredString(RecordTag.service.rawValue, length: 1...255),
                resumeAfter: try fields.requiredInteger(RecordTag.resumeAfter.rawValue),
                window: try fields.integer(RecordTag.window.rawValue),
                extensions: ext))
        case .openOK:
            return .openOK(OpenOK(
                session: session,
                lastAcked: try fields.requiredInteger(RecordTag.lastAcked.rawValue),
                window: try fields.integer(RecordTag.window.rawValue),
                extensions: ext))
        case .openFail:
            return .openFail(OpenFail(
                session: session,
                code: WireCode(rawValue: try fields.requiredInteger(RecordTag.code.rawValue)),
                message: try fields.string(RecordTag.message.rawValue),
                extensions: ext))
        case .close:
            return .close(Close(
                session: session,
                code: try fields.integer(RecordTag.code.rawValue, as: UInt16.self).map(WireCode.init(rawValue:)),
                extensions: ext))
        case .ack:
            return .ack(Ack(session: session, seq: seq, extensions: ext))
        case .window:
            return .window(WindowUpdate(
                session: session,
                window: try fields.requiredInteger(RecordTag.window.rawValue),
                extensions: ext))
        case .data:
            preconditionFailure("DATA bodies are not TLV and never reach controlFrame")
        }
    }
}

extension FrameType {
    /// The records this frame type defines, in the specification's order.
    var knownTags: [RecordTag] {
        switch self {
        case .hello: [.versionMin, .versionMax, .features, .agentID, .agentVersion, .maxFrame]
        case .helloOK: [.version, .features, .maxFrame]
        case .login: [.token, .agentID]
        case .loginOK: [.heartbeatMS, .serverTimeMS]
        case .loginFail: [.code, .message, .retryAfterMS]
        case .ping, .pong: [.timestampUS]
        case .goaway: [.code, .message, .retryAfterMS, .redirect]
        case .error: [.code, .message]
        case .open: [.service, .resumeAfter, .window]
        case .openOK: [.lastAcked, .window]
        case .openFail: [.code, .message]
        case .close: [.code]
        case .data, .ack: []
        case .window: [.window]
        }
    }
}
