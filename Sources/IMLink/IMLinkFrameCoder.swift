import NIOCore

/// Turns inbound bytes into `Frame`s on a channel, one at a time.
///
/// `maxBody` starts at 1 MiB (the limit before HELLO_OK) and is raised by the
/// connection once both sides have announced MAX_FRAME. A large frame that
/// arrives over several reads is gathered into a buffer of its own
/// (`FrameAssembly`).
public struct IMLinkFrameDecoder: NIOSingleStepByteToMessageDecoder {
    public typealias InboundOut = Frame

    public var maxBody: UInt32
    private var assembly = FrameAssembly()

    public init(maxBody: UInt32 = FrameHeader.defaultMaxBody) {
        self.maxBody = min(maxBody, FrameHeader.maxNegotiableBody)
    }

    public mutating func decode(buffer: inout ByteBuffer) throws -> Frame? {
        let maxBody = maxBody
        switch try assembly.next(from: &buffer, frameSize: { header throws(IMLinkError) in
            try FrameParser.frameSize(header, maxBody: maxBody)
        }) {
        case .inPlace:
            return try FrameParser.parse(&buffer, maxBody: maxBody)
        case .gathered(var whole):
            // Exactly one whole frame: parsed, or refused (its CRC) as it would be in place.
            return try FrameParser.parse(&whole, maxBody: maxBody)
        case .needMoreData:
            return nil
        }
    }

    public mutating func decodeLast(buffer: inout ByteBuffer, seenEOF: Bool) throws -> Frame? {
        try decode(buffer: &buffer)
    }
}

/// Writes outbound `Frame`s to a channel.
public struct IMLinkFrameEncoder: MessageToByteEncoder {
    public typealias OutboundIn = Frame

    public init() {}

    public func encode(data: Frame, out: inout ByteBuffer) throws {
        data.encode(into: &out)
    }
}
