import NIOCore

/// An outbound message waiting in the outbox for the server's ACK.
public struct OutboundMessage: Sendable, Hashable {
    public var seq: UInt64
    public var payload: ByteBuffer
    /// When the message expires (ms since the Unix epoch), or nil for never.
    public var expiresAtMS: Int64?

    public init(seq: UInt64, payload: ByteBuffer, expiresAtMS: Int64? = nil) {
        self.seq = seq
        self.payload = payload
        self.expiresAtMS = expiresAtMS
    }
}

/// An inbound message waiting in the inbox for a client's ACK.
public struct InboundMessage: Sendable, Hashable {
    public var seq: UInt64
    public var payload: ByteBuffer

    public init(seq: UInt64, payload: ByteBuffer) {
        self.seq = seq
        self.payload = payload
    }
}
