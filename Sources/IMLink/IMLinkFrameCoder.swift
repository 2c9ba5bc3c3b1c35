import NIOCore

/// Turns inbound bytes into `Frame`s on a channel, one at a time.
///
/// `maxBody` starts at 1 MiB (the limit before HELLO_OK) and is raised by the
/// connection once both sides have announced MAX_FRAME.
public struct IMLinkFrameDecoder: NIOSingleStepByteToMessageDecoder {
    public typealias InboundOut = Frame

    public var maxBody: UInt32

    public init(maxBody: UInt32 = FrameHeader.defaultMaxBody) {
        self.maxBody = min(maxBody, FrameHeader.maxNegotiableBody)
    }

    public mutating func decode(buffer: inout ByteBuffer) throws -> Frame? {
        try FrameParser.parse(&buffer, maxBody: maxBody)
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
