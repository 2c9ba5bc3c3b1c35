import IMLink

/// Why a frame was refused (`ipc.md` section 2). The daemon answers each with
/// an `ERROR` frame carrying `code` and `request`, then acts on `closesConnection`.
public enum IPCError: Error, Hashable, Sendable, CustomStringConvertible {
    /// `length` is below 6, so not even op and request fit: the stream can
    /// no longer be split into frames.
    case lengthBelowMinimum(UInt32)
    /// `length` is above MAX_PAYLOAD + 64 KiB; refused from the 4 length
    /// bytes alone, before any of the frame was buffered.
    case frameTooLarge(length: UInt32, limit: UInt64)
    /// An op this implementation does not know.
    case unknownOp(UInt16, request: UInt32)
    /// The records do not parse, or a value has the wrong size, length or encoding.
    case badRecord(IPCOp, request: UInt32, TLVError)
    /// A record the op requires is absent (for OPEN: SERVICE when a new
    /// session is asked for).
    case missingRecord(IPCOp, request: UInt32, IPCTag)
    /// A u8 record whose value the specification does not define (PRIORITY
    /// above 2, DURABLE other than 0 or 1).
    case invalidValue(IPCOp, request: UInt32, IPCTag, value: UInt8)

    /// The code of the `ERROR` frame the daemon sends back.
    public var code: IPCErrorCode {
        switch self {
        case .frameTooLarge: .payloadTooLarge
        case .lengthBelowMinimum, .unknownOp, .badRecord, .missingRecord, .invalidValue: .badRequest
        }
    }

    /// The request id for the `ERROR` frame: the refused frame's own, or 0
    /// when the frame was refused before its header could be read.
    public var request: UInt32 {
        switch self {
        case .lengthBelowMinimum, .frameTooLarge: 0
        case .unknownOp(_, let request), .badRecord(_, let request, _), .missingRecord(_, let request, _),
             .invalidValue(_, let request, _, _):
            request
        }
    }

    /// Whether the connection must be closed after the `ERROR` frame.
    /// Section 2 closes on every malformed frame — even where the stream
    /// could still be split into frames, the client is not speaking the
    /// protocol — so each case answers true; a case added later has to decide.
    public var closesConnection: Bool {
        switch self {
        case .lengthBelowMinimum, .frameTooLarge, .unknownOp, .badRecord, .missingRecord, .invalidValue: true
        }
    }

    public var description: String {
        switch self {
        case .lengthBelowMinimum(let length):
            "frame length \(length) is below 6, the size of op and request alone"
        case .frameTooLarge(let length, let limit):
            "frame length \(length) is above the limit of \(limit) bytes (MAX_PAYLOAD + 64 KiB)"
        case .unknownOp(let op, let request):
            "unknown op 0x\(String(op, radix: 16)) (request \(request))"
        case .badRecord(let op, let request, let error):
            "\(op) (request \(request)): \(error.describe(tagName: { IPCTag(rawValue: $0).description }))"
        case .missingRecord(let op, let request, let tag):
            "\(op) (request \(request)): required record \(tag) is missing"
        case .invalidValue(let op, let request, let tag, let value):
            "\(op) (request \(request)): \(tag) value \(value) is not defined by the specification"
        }
    }
}
