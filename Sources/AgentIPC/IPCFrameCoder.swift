import NIOCore

/// Turns inbound bytes into `IPCFrame`s on a channel, one at a time.
///
/// A daemon sets `maxPayload` to the MAX_PAYLOAD it announces in WELCOME; a
/// client to the one it received. Frames up to 64 KiB above it pass.
public struct IPCFrameDecoder: NIOSingleStepByteToMessageDecoder {
    public typealias InboundOut = IPCFrame

    public var maxPayload: UInt32

    public init(maxPayload: UInt32 = IPCFrameHeader.defaultMaxPayload) {
        self.maxPayload = maxPayload
    }

    public mutating func decode(buffer: inout ByteBuffer) throws -> IPCFrame? {
        try IPCFrameParser.parse(&buffer, maxPayload: maxPayload)
    }

    public mutating func decodeLast(buffer: inout ByteBuffer, seenEOF: Bool) throws -> IPCFrame? {
        try decode(buffer: &buffer)
    }
}

/// Writes outbound `IPCFrame`s to a channel.
public struct IPCFrameEncoder: MessageToByteEncoder {
    public typealias OutboundIn = IPCFrame

    public init() {}

    public func encode(data: IPCFrame, out: inout ByteBuffer) throws {
        data.encode(into: &out)
    }
}
