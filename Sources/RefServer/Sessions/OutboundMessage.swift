import NIOCore

/// A server→agent message the agent has not acknowledged yet.
struct OutboundMessage: Hashable, Sendable {
    var seq: UInt64
    var compressed: Bool
    var body: ByteBuffer
}
