import IMLink
import NIOCore

extension IPCFrame {
    /// Appends the whole frame — length, op, request and records — to `buffer`.
    public func encode(into buffer: inout ByteBuffer) {
        _ = encode(into: &buffer, leavingPayloadFrom: .max)  // no payload is that large: all written
    }

    /// Appends the frame, except a MESSAGE payload of `threshold` bytes or more, which it
    /// returns for the caller to write right after as a buffer of its own: a gathering write
    /// that does not copy a large payload. The payload is MESSAGE's last record.
    public func encode(into buffer: inout ByteBuffer, leavingPayloadFrom threshold: Int) -> ByteBuffer? {
        let start = buffer.writerIndex
        buffer.writeBigEndian(count: IPCFrameHeader.size) { header in
            header.put(UInt32(0))  // the length, set below
            header.put(message.op.rawValue)
            header.put(request)
        }
        let payload = message.writeRecords(into: &buffer, leavingPayloadFrom: threshold)
        let length = buffer.writerIndex - start - IPCFrameHeader.lengthFieldSize + (payload?.readableBytes ?? 0)
        buffer.setInteger(UInt32(length), at: start)
        return payload
    }

    /// The frame as a new buffer.
    public func encoded(allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: IPCFrameHeader.size + 64)
        encode(into: &buffer)
        return buffer
    }
}

extension IPCMessage {
    /// Extensions first, then the known records in the order of `op.recordTags`;
    /// absent optionals write nothing. A MESSAGE payload of `threshold` bytes or more is
    /// returned instead of written, after its record's tag and length.
    fileprivate func writeRecords(into buffer: inout ByteBuffer, leavingPayloadFrom threshold: Int) -> ByteBuffer? {
        switch self {
        case .hello(let m):
            buffer.writeExtensions(m.extensions)
            buffer.writeRecord(.ipcVersion, m.ipcVersion)
            buffer.writeRecord(.clientName, m.clientName)
        case .open(let m):
            buffer.writeExtensions(m.extensions)
            buffer.writeRecord(.session, m.session)
            buffer.writeRecord(.service, m.service)
            buffer.writeRecord(.priority, m.priority?.rawValue)
            buffer.writeRecord(.durable, m.durable.map { UInt8($0 ? 1 : 0) })
        case .close(let m), .detach(let m):
            buffer.writeExtensions(m.extensions)
            buffer.writeRecord(.session, m.session)
        case .send(let m):
            buffer.writeExtensions(m.extensions)
            buffer.writeRecord(.session, m.session)
            buffer.writeRecord(.payload, m.payload)
            buffer.writeRecord(.ttlMS, m.ttlMS)
        case .ack(let m), .accepted(let m), .acked(let m):
            buffer.writeExtensions(m.extensions)
            buffer.writeRecord(.session, m.session)
            buffer.writeRecord(.seq, m.seq)
        case .status(let m), .sessions(let m), .metrics(let m), .watch(let m), .events(let m), .connect(let m),
             .disconnect(let m), .reconnect(let m), .reload(let m), .ping(let m), .ok(let m), .pong(let m):
            buffer.writeExtensions(m.extensions)
        case .welcome(let m):
            buffer.writeExtensions(m.extensions)
            buffer.writeRecord(.ipcVersion, m.ipcVersion)
            buffer.writeRecord(.daemonVersion, m.daemonVersion)
            buffer.writeRecord(.maxPayload, m.maxPayload)
            buffer.writeRecord(.linkState, m.linkState.rawValue)
        case .opened(let m):
            buffer.writeExtensions(m.extensions)
            buffer.writeRecord(.session, m.session)
            buffer.writeRecord(.sessionState, m.sessionState.rawValue)
            buffer.writeRecord(.sentSeq, m.sentSeq)
            buffer.writeRecord(.ackedSeq, m.ackedSeq)
            buffer.writeRecord(.deliveredSeq, m.deliveredSeq)
        case .result(let m), .event(let m):
            buffer.writeExtensions(m.extensions)
            buffer.writeRecord(.json, m.json)
        case .error(let m):
            buffer.writeExtensions(m.extensions)
            buffer.writeRecord(.code, m.code.rawValue)
            buffer.writeRecord(.message, m.message)
        case .message(let m):
            buffer.writeExtensions(m.extensions)
            buffer.writeRecord(.session, m.session)
            buffer.writeRecord(.seq, m.seq)
            guard m.payload.readableBytes >= threshold else {
                buffer.writeRecord(.payload, m.payload)
                return nil
            }
            // The record's tag and length; its value is the payload the caller writes next.
            buffer.writeInteger(IPCTag.payload.rawValue)
            buffer.writeInteger(UInt32(m.payload.readableBytes))
            return m.payload
        case .expired(let m):
            buffer.writeExtensions(m.extensions)
            buffer.writeRecord(.session, m.session)
            buffer.writeRecord(.seq, m.seq)
            buffer.writeRecord(.code, m.code.rawValue)
            buffer.writeRecord(.message, m.message)
        case .sessionState(let m):
            buffer.writeExtensions(m.extensions)
            buffer.writeRecord(.session, m.session)
            buffer.writeRecord(.sessionState, m.state.rawValue)
            buffer.writeRecord(.code, m.code?.rawValue)
            buffer.writeRecord(.message, m.message)
        case .linkState(let m):
            buffer.writeExtensions(m.extensions)
            buffer.writeRecord(.linkState, m.state.rawValue)
        }
        return nil
    }
}

/// The records `writeRecords` writes, as methods rather than nested functions: the compiler
/// does not specialize a nested generic function, and every integer record would go through
/// the generic `writeTLV` (hundreds of instructions each, twice per ACCEPTED and MESSAGE).
private extension ByteBuffer {
    mutating func writeExtensions(_ records: [TLVRecord]) {
        for record in records { writeTLV(tag: record.tag, value: record.value) }
    }

    mutating func writeRecord<I: FixedWidthInteger>(_ tag: IPCTag, _ value: I?) {
        if let value { writeTLV(tag: tag.rawValue, integer: value) }
    }

    mutating func writeRecord(_ tag: IPCTag, _ value: String?) {
        if let value { writeTLV(tag: tag.rawValue, string: value) }
    }

    mutating func writeRecord(_ tag: IPCTag, _ value: ByteBuffer) {
        writeTLV(tag: tag.rawValue, value: value)
    }
}
