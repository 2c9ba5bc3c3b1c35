import NIOCore

/// An outbound message waiting in the outbox for the server's ACK.
public struct OutboundMessage: Sendable, Hashable {
    public var seq: UInt64
    public var payload: ByteBuffer
    /// When the message expires (ms since the Unix epoch), or nil for never.
    public var expiresAtMS: Int64?
    /// The payload's CRC-32C when the store has it (a large payload, checked as it was read),
    /// so the link need not compute it again. Not part of the message's value.
    public var payloadCRC: UInt32?

    public init(seq: UInt64, payload: ByteBuffer, expiresAtMS: Int64? = nil, payloadCRC: UInt32? = nil) {
        self.seq = seq
        self.payload = payload
        self.expiresAtMS = expiresAtMS
        self.payloadCRC = payloadCRC
    }

    public static func == (lhs: OutboundMessage, rhs: OutboundMessage) -> Bool {
        lhs.seq == rhs.seq && lhs.payload == rhs.payload && lhs.expiresAtMS == rhs.expiresAtMS
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(seq)
        hasher.combine(payload)
        hasher.combine(expiresAtMS)
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
