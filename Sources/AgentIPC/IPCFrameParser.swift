import IMLink
import NIOCore

/// Incremental frame parsing, independent of any channel: call `parse` with
/// the bytes received so far; it consumes one whole frame or nothing.
public enum IPCFrameParser {
    /// The whole frame's size once its length field is there (nil before), the length checked
    /// against 6 and against `maxPayload` + 64 KiB: `parse` starts here.
    public static func frameSize(_ buffer: ByteBuffer, maxPayload: UInt32) throws(IPCError) -> Int? {
        guard let length = buffer.getInteger(at: buffer.readerIndex, as: UInt32.self) else { return nil }
        guard length >= IPCFrameHeader.minimumLength else { throw .lengthBelowMinimum(length) }
        let limit = IPCFrameHeader.lengthLimit(maxPayload: maxPayload)
        guard UInt64(length) <= limit else { throw .frameTooLarge(length: length, limit: limit) }
        return IPCFrameHeader.lengthFieldSize + Int(length)
    }

    /// Reads one frame from the front of `buffer`.
    ///
    /// Returns nil, leaving `buffer` untouched, while the frame is incomplete.
    /// `length` is checked as soon as its 4 bytes are there — against 6 and
    /// against `maxPayload` + 64 KiB — so a hostile length costs no memory,
    /// and the op as soon as the 10-byte header is there. On a throw `buffer`
    /// is untouched too, but the stream is no longer usable: see `IPCError`.
    public static func parse(_ buffer: inout ByteBuffer,
                             maxPayload: UInt32 = IPCFrameHeader.defaultMaxPayload) throws(IPCError) -> IPCFrame? {
        guard let frameSize = try frameSize(buffer, maxPayload: maxPayload) else { return nil }
        let start = buffer.readerIndex
        guard buffer.readableBytes >= IPCFrameHeader.size,
              let rawOp = buffer.getInteger(at: start + 4, as: UInt16.self),
              let request = buffer.getInteger(at: start + 6, as: UInt32.self)
        else { return nil }
        guard let op = IPCOp(rawValue: rawOp) else { throw .unknownOp(rawOp, request: request) }

        guard buffer.readableBytes >= frameSize,
              let body = buffer.getSlice(at: start + IPCFrameHeader.size, length: frameSize - IPCFrameHeader.size)
        else { return nil }

        let message = try decodeMessage(op, request: request, body: body)
        buffer.moveReaderIndex(forwardBy: frameSize)
        return IPCFrame(request: request, message: message)
    }

    private static func decodeMessage(_ op: IPCOp, request: UInt32, body: ByteBuffer) throws(IPCError) -> IPCMessage {
        let records = try RecordReader(op: op, request: request, body: body)
        let ext = records.extensions
        switch op {
        case .hello:
            return .hello(.init(
                ipcVersion: try records.required(.ipcVersion),
                clientName: try records.string(.clientName, length: 0...128),
                extensions: ext))
        case .open:
            let open = IPCMessage.Open(
                session: try records.integer(.session),
                service: try records.string(.service, length: 1...255),
                priority: try records.priority(),
                durable: try records.durable(),
                extensions: ext)
            guard !open.createsSession || open.service != nil else {
                throw .missingRecord(op, request: request, .service)
            }
            return .open(open)
        case .close:
            return .close(.init(session: try records.required(.session), extensions: ext))
        case .detach:
            return .detach(.init(session: try records.required(.session), extensions: ext))
        case .send:
            return .send(.init(
                session: try records.required(.session),
                payload: try records.requiredBytes(.payload),
                ttlMS: try records.integer(.ttlMS),
                extensions: ext))
        case .ack:
            return .ack(.init(session: try records.required(.session), seq: try records.required(.seq), extensions: ext))
        case .status: return .status(.init(extensions: ext))
        case .sessions: return .sessions(.init(extensions: ext))
        case .metrics: return .metrics(.init(extensions: ext))
        case .watch: return .watch(.init(extensions: ext))
        case .events: return .events(.init(extensions: ext))
        case .connect: return .connect(.init(extensions: ext))
        case .disconnect: return .disconnect(.init(extensions: ext))
        case .reconnect: return .reconnect(.init(extensions: ext))
        case .reload: return .reload(.init(extensions: ext))
        case .ping: return .ping(.init(extensions: ext))
        case .ok: return .ok(.init(extensions: ext))
        case .pong: return .pong(.init(extensions: ext))
        case .welcome:
            return .welcome(.init(
                ipcVersion: try records.required(.ipcVersion),
                daemonVersion: try records.requiredString(.daemonVersion),
                maxPayload: try records.required(.maxPayload),
                linkState: LinkStateValue(rawValue: try records.required(.linkState)),
                extensions: ext))
        case .opened:
            return .opened(.init(
                session: try records.required(.session),
                sessionState: SessionStateValue(rawValue: try records.required(.sessionState)),
                sentSeq: try records.required(.sentSeq),
                ackedSeq: try records.required(.ackedSeq),
                deliveredSeq: try records.required(.deliveredSeq),
                extensions: ext))
        case .accepted:
            return .accepted(.init(session: try records.required(.session), seq: try records.required(.seq), extensions: ext))
        case .result:
            return .result(.init(json: try records.requiredString(.json), extensions: ext))
        case .error:
            return .error(.init(
                code: IPCErrorCode(rawValue: try records.required(.code)),
                message: try records.string(.message),
                extensions: ext))
        case .message:
            return .message(.init(
                session: try records.required(.session),
                seq: try records.required(.seq),
                payload: try records.requiredBytes(.payload),
                extensions: ext))
        case .acked:
            return .acked(.init(session: try records.required(.session), seq: try records.required(.seq), extensions: ext))
        case .expired:
            return .expired(.init(
                session: try records.required(.session),
                seq: try records.required(.seq),
                code: IPCErrorCode(rawValue: try records.required(.code)),
                message: try records.string(.message),
                extensions: ext))
        case .sessionState:
            return .sessionState(.init(
                session: try records.required(.session),
                state: SessionStateValue(rawValue: try records.required(.sessionState)),
                code: try records.integer(.code, as: UInt16.self).map(IPCErrorCode.init(rawValue:)),
                message: try records.string(.message),
                extensions: ext))
        case .linkState:
            return .linkState(.init(state: LinkStateValue(rawValue: try records.required(.linkState)), extensions: ext))
        case .event:
            return .event(.init(json: try records.requiredString(.json), extensions: ext))
        }
    }
}

/// `TLVFields` for one frame: lookups by `IPCTag` whose failures come out as
/// `IPCError`s naming the op and request, with a missing record reported as
/// `missingRecord` rather than a generic record error.
private struct RecordReader {
    let op: IPCOp
    let request: UInt32
    let fields: TLVFields

    init(op: IPCOp, request: UInt32, body: ByteBuffer) throws(IPCError) {
        self.op = op
        self.request = request
        do {
            fields = try TLVFields(body: body, known: op.recordTags.map(\.rawValue))
        } catch {
            throw .badRecord(op, request: request, error)
        }
    }

    var extensions: [TLVRecord] { fields.extensions }

    func integer<I: FixedWidthInteger>(_ tag: IPCTag, as: I.Type = I.self) throws(IPCError) -> I? {
        do { return try fields.integer(tag.rawValue, as: I.self) } catch { throw refusal(error) }
    }

    func required<I: FixedWidthInteger>(_ tag: IPCTag, as: I.Type = I.self) throws(IPCError) -> I {
        do { return try fields.requiredInteger(tag.rawValue, as: I.self) } catch { throw refusal(error) }
    }

    func string(_ tag: IPCTag, length allowed: ClosedRange<Int> = 0...Int.max) throws(IPCError) -> String? {
        do { return try fields.string(tag.rawValue, length: allowed) } catch { throw refusal(error) }
    }

    func requiredString(_ tag: IPCTag) throws(IPCError) -> String {
        do { return try fields.requiredString(tag.rawValue) } catch { throw refusal(error) }
    }

    func requiredBytes(_ tag: IPCTag) throws(IPCError) -> ByteBuffer {
        do { return try fields.requiredBytes(tag.rawValue) } catch { throw refusal(error) }
    }

    func priority() throws(IPCError) -> IPCPriority? {
        guard let raw = try integer(.priority, as: UInt8.self) else { return nil }
        guard let priority = IPCPriority(rawValue: raw) else {
            throw .invalidValue(op, request: request, .priority, value: raw)
        }
        return priority
    }

    func durable() throws(IPCError) -> Bool? {
        switch try integer(.durable, as: UInt8.self) {
        case nil: nil
        case 0: false
        case 1: true
        case let raw?: throw .invalidValue(op, request: request, .durable, value: raw)
        }
    }

    private func refusal(_ error: TLVError) -> IPCError {
        if case .missing(let tag) = error {
            return .missingRecord(op, request: request, IPCTag(rawValue: tag))
        }
        return .badRecord(op, request: request, error)
    }
}
