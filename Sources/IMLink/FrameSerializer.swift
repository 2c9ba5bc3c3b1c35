import NIOCore

extension Frame {
    /// Appends the frame — header, body and CRC — to `buffer`.
    public func encode(into buffer: inout ByteBuffer) {
        if case .data(let data) = self {
            data.encodeHeader(into: &buffer)
            buffer.writeImmutableBuffer(data.body)
            return
        }
        let start = buffer.writerIndex
        writeHeader(into: &buffer, type: type, flags: 0, session: session, seq: headerSeq, length: 0)
        writeBody(into: &buffer)
        let length = buffer.writerIndex - start - FrameHeader.size
        buffer.setInteger(UInt32(length), at: start + FrameHeader.lengthOffset)
        let crc = buffer.withUnsafeReadableBytes { bytes in
            var crc = CRC32C()
            crc.update(UnsafeRawBufferPointer(rebasing: bytes[(start - buffer.readerIndex)...].prefix(FrameHeader.crcOffset)))
            crc.update(UnsafeRawBufferPointer(rebasing: bytes[(start - buffer.readerIndex + FrameHeader.size)...]))
            return crc.value
        }
        buffer.setInteger(crc, at: start + FrameHeader.crcOffset)
    }

    /// Appends the frame, except a DATA body of `threshold` bytes or more, which it returns for
    /// the caller to write right after the header as a buffer of its own: a gathering write that
    /// does not copy a large payload.
    public func encode(into buffer: inout ByteBuffer, leavingBodyFrom threshold: Int) -> ByteBuffer? {
        guard case .data(let data) = self, data.body.readableBytes >= threshold else {
            encode(into: &buffer)
            return nil
        }
        data.encodeHeader(into: &buffer)
        return data.body
    }

    /// The frame as a new buffer.
    public func encoded(allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: FrameHeader.size + 64)
        encode(into: &buffer)
        return buffer
    }

    private var headerSeq: UInt64 {
        switch self {
        case .ping(let ping), .pong(let ping): ping.id
        case .data(let data): data.seq
        case .ack(let ack): ack.seq
        case .hello, .helloOK, .login, .loginOK, .loginFail, .goaway, .error, .open, .openOK, .openFail,
             .close, .window:
            0
        }
    }

    private func writeBody(into buffer: inout ByteBuffer) {
        func extensions(_ records: [TLVRecord]) {
            for record in records { buffer.writeTLV(tag: record.tag, value: record.value) }
        }
        func integer<I: FixedWidthInteger>(_ tag: RecordTag, _ value: I?) {
            if let value { buffer.writeTLV(tag: tag.rawValue, integer: value) }
        }
        func string(_ tag: RecordTag, _ value: String?) {
            if let value { buffer.writeTLV(tag: tag.rawValue, string: value) }
        }
        switch self {
        case .hello(let f):
            extensions(f.extensions)
            integer(.versionMin, f.versionMin)
            integer(.versionMax, f.versionMax)
            integer(.features, f.features.rawValue)
            string(.agentID, f.agentID)
            string(.agentVersion, f.agentVersion)
            integer(.maxFrame, f.maxFrame)
        case .helloOK(let f):
            extensions(f.extensions)
            integer(.version, f.version)
            integer(.features, f.features.rawValue)
            integer(.maxFrame, f.maxFrame)
        case .login(let f):
            extensions(f.extensions)
            buffer.writeTLV(tag: RecordTag.token.rawValue, value: f.token)
            string(.agentID, f.agentID)
        case .loginOK(let f):
            extensions(f.extensions)
            integer(.heartbeatMS, f.heartbeatMS)
            integer(.serverTimeMS, f.serverTimeMS)
        case .loginFail(let f):
            extensions(f.extensions)
            integer(.code, f.code.rawValue)
            string(.message, f.message)
            integer(.retryAfterMS, f.retryAfterMS)
        case .ping(let f), .pong(let f):
            extensions(f.extensions)
            integer(.timestampUS, f.timestampUS)
        case .goaway(let f):
            extensions(f.extensions)
            integer(.code, f.code.rawValue)
            string(.message, f.message)
            integer(.retryAfterMS, f.retryAfterMS)
            string(.redirect, f.redirect)
        case .error(let f):
            extensions(f.extensions)
            integer(.code, f.code.rawValue)
            string(.message, f.message)
        case .open(let f):
            extensions(f.extensions)
            string(.service, f.service)
            integer(.resumeAfter, f.resumeAfter)
            integer(.window, f.window)
        case .openOK(let f):
            extensions(f.extensions)
            integer(.lastAcked, f.lastAcked)
            integer(.window, f.window)
        case .openFail(let f):
            extensions(f.extensions)
            integer(.code, f.code.rawValue)
            string(.message, f.message)
        case .close(let f):
            extensions(f.extensions)
            integer(.code, f.code?.rawValue)
        case .ack(let f):
            extensions(f.extensions)
        case .window(let f):
            extensions(f.extensions)
            integer(.window, f.window)
        case .data(let f):
            buffer.writeImmutableBuffer(f.body)
        }
    }
}

extension DataFrame {
    /// Appends only the 32-byte header, CRC included, so the body can be
    /// written after it without being copied (a gathering write).
    public func encodeHeader(into buffer: inout ByteBuffer) {
        let start = buffer.writerIndex
        writeHeader(into: &buffer, type: .data, flags: compressed ? FrameHeader.compressedFlag : 0,
                    session: session, seq: seq, length: UInt32(body.readableBytes))
        let crc = buffer.withUnsafeReadableBytes { bytes in
            var crc = CRC32C()
            crc.update(UnsafeRawBufferPointer(rebasing: bytes[(start - buffer.readerIndex)...].prefix(FrameHeader.crcOffset)))
            guard let bodyCRC else {
                crc.update(body)
                return crc.value
            }
            return CRC32C.combine(crc.value, bodyCRC, secondLength: body.readableBytes)
        }
        buffer.setInteger(crc, at: start + FrameHeader.crcOffset)
    }
}

private func writeHeader(into buffer: inout ByteBuffer, type: FrameType, flags: UInt16, session: UInt64, seq: UInt64, length: UInt32) {
    buffer.writeBigEndian(count: FrameHeader.size) { header in
        header.put(FrameHeader.magic)
        header.put(FrameHeader.version)
        header.put(type.rawValue)
        header.put(flags)
        header.put(UInt16(0))
        header.put(session)
        header.put(seq)
        header.put(length)
        header.put(UInt32(0))  // CRC, set once the body is known
    }
}
