/// A fatal IMLink protocol error (`wire.md` sections 1, 2 and 4): the receiver
/// sends `ERROR` with `code` and closes the connection.
public enum IMLinkError: Error, Hashable, Sendable, CustomStringConvertible {
    case wrongMagic(UInt16)
    case wrongVersion(UInt8)
    case reservedFlagSet(flags: UInt16)
    case unknownFrameType(UInt8)
    /// `length` above the negotiated maximum; the body was never buffered.
    case frameTooLarge(length: UInt32, limit: UInt32)
    case crcMismatch(received: UInt32, computed: UInt32)
    /// `COMPRESSED` on a frame other than DATA.
    case compressedControlFrame(FrameType)
    /// A link frame with a session id, or a session frame without one.
    case wrongSession(FrameType, session: UInt64)
    case badRecord(FrameType, TLVError)
    /// A frame that may not be sent in the link's current phase.
    case illegalInPhase(FrameType, phase: String)

    /// The code to put in the `ERROR` frame sent before closing.
    public var code: WireCode {
        switch self {
        case .frameTooLarge: .frameTooLarge
        case .wrongMagic, .wrongVersion, .reservedFlagSet, .unknownFrameType, .crcMismatch,
             .compressedControlFrame, .wrongSession, .badRecord, .illegalInPhase:
            .protocolError
        }
    }

    public var description: String {
        switch self {
        case .wrongMagic(let magic):
            "wrong magic 0x\(String(magic, radix: 16)) (expected 0x494d \"IM\"): not an IMLink peer"
        case .wrongVersion(let version):
            "wrong frame version \(version) (this implementation speaks 1)"
        case .reservedFlagSet(let flags):
            "reserved flag bits set (flags 0x\(String(flags, radix: 16)))"
        case .unknownFrameType(let type):
            "unknown frame type 0x\(String(type, radix: 16))"
        case .frameTooLarge(let length, let limit):
            "frame body of \(length) bytes is above the limit of \(limit) bytes"
        case .crcMismatch(let received, let computed):
            "CRC mismatch: frame says 0x\(String(received, radix: 16)), bytes give 0x\(String(computed, radix: 16))"
        case .compressedControlFrame(let type):
            "COMPRESSED flag set on \(type.name); only DATA may be compressed"
        case .wrongSession(let type, let session):
            session == 0 ? "\(type.name) needs a session id" : "\(type.name) must carry session 0, not \(session)"
        case .badRecord(let type, let error):
            "\(type.name): \(error.describe(tagName: { RecordTag(rawValue: $0).description }))"
        case .illegalInPhase(let type, let phase):
            "\(type.name) is not allowed \(phase)"
        }
    }
}

extension TLVError {
    /// A sentence for logs and `ERROR` messages, with tags named by the protocol.
    public func describe(tagName: (UInt16) -> String) -> String {
        switch self {
        case .overrun(let tag, let declared, let remaining):
            if let tag, let declared {
                "record \(tagName(tag)) declares \(declared) bytes but only \(remaining) remain in the body"
            } else {
                "a record header needs 6 bytes but only \(remaining) remain in the body"
            }
        case .wrongSize(let tag, let expected, let actual):
            "\(tagName(tag)) must be \(expected) bytes, not \(actual)"
        case .lengthOutOfRange(let tag, let length, let allowed):
            "\(tagName(tag)) is \(length) bytes; allowed \(allowed.lowerBound)–\(allowed.upperBound)"
        case .duplicate(let tag):
            "\(tagName(tag)) appears more than once"
        case .missing(let tag):
            "required record \(tagName(tag)) is missing"
        case .invalidUTF8(let tag):
            "\(tagName(tag)) is not valid UTF-8"
        }
    }
}
