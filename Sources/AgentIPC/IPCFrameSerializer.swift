import IMLink
import NIOCore

extension IPCFrame {
    /// Appends the whole frame — length, op, request and records — to `buffer`.
    public func encode(into buffer: inout ByteBuffer) {
        let start = buffer.writerIndex
        buffer.writeInteger(UInt32(0))
        buffer.writeInteger(message.op.rawValue)
        buffer.writeInteger(request)
        message.writeRecords(into: &buffer)
        let length = buffer.writerIndex - start - IPCFrameHeader.lengthFieldSize
        buffer.setInteger(UInt32(length), at: start)
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
    /// absent optionals write nothing.
    fileprivate func writeRecords(into buffer: inout ByteBuffer) {
        func extensions(_ records: [TLVRecord]) {
            for record in records { buffer.writeTLV(tag: record.tag, value: record.value) }
        }
        func integer<I: FixedWidthInteger>(_ tag: IPCTag, _ value: I?) {
            if let value { buffer.writeTLV(tag: tag.rawValue, integer: value) }
        }
        func string(_ tag: IPCTag, _ value: String?) {
            if let value { buffer.writeTLV(tag: tag.rawValue, string: value) }
        }
        func bytes(_ tag: IPCTag, _ value: ByteBuffer) {
            buffer.writeTLV(tag: tag.rawValue, value: value)
        }
        switch self {
        case .hello(let m):
            extensions(m.extensions)
            integer(.ipcVersion, m.ipcVersion)
            string(.clientName, m.clientName)
        case .open(let m):
            extensions(m.extensions)
            integer(.session, m.session)
            string(.service, m.service)
            integer(.priority, m.priority?.rawValue)
            integer(.durable, m.durable.map { UInt8($0 ? 1 : 0) })
        case .close(let m), .detach(let m):
            extensions(m.extensions)
            integer(.session, m.session)
        case .send(let m):
            extensions(m.extensions)
            integer(.session, m.session)
            bytes(.payload, m.payload)
            integer(.ttlMS, m.ttlMS)
        case .ack(let m), .accepted(let m), .acked(let m):
            extensions(m.extensions)
            integer(.session, m.session)
            integer(.seq, m.seq)
        case .status(let m), .sessions(let m), .metrics(let m), .watch(let m), .events(let m), .connect(let m),
             .disconnect(let m), .reconnect(let m), .reload(let m), .ping(let m), .ok(let m), .pong(let m):
            extensions(m.extensions)
        case .welcome(let m):
            extensions(m.extensions)
            integer(.ipcVersion, m.ipcVersion)
            string(.daemonVersion, m.daemonVersion)
            integer(.maxPayload, m.maxPayload)
            integer(.linkState, m.linkState.rawValue)
        case .opened(let m):
            extensions(m.extensions)
            integer(.session, m.session)
            integer(.sessionState, m.sessionState.rawValue)
            integer(.sentSeq, m.sentSeq)
            integer(.ackedSeq, m.ackedSeq)
            integer(.deliveredSeq, m.deliveredSeq)
        case .result(let m), .event(let m):
            extensions(m.extensions)
            string(.json, m.json)
        case .error(let m):
            extensions(m.extensions)
            integer(.code, m.code.rawValue)
            string(.message, m.message)
        case .message(let m):
            extensions(m.extensions)
            integer(.session, m.session)
            integer(.seq, m.seq)
            bytes(.payload, m.payload)
        case .expired(let m):
            extensions(m.extensions)
            integer(.session, m.session)
            integer(.seq, m.seq)
            integer(.code, m.code.rawValue)
            string(.message, m.message)
        case .sessionState(let m):
            extensions(m.extensions)
            integer(.session, m.session)
            integer(.sessionState, m.state.rawValue)
            integer(.code, m.code?.rawValue)
            string(.message, m.message)
        case .linkState(let m):
            extensions(m.extensions)
            integer(.linkState, m.state.rawValue)
        }
    }
}
