import NIOCore

/// Everything the server knows about one session; it outlives connections.
struct Session: Sendable {
    /// Where the session is open right now, and how far sending got there.
    struct Attachment: Hashable, Sendable {
        var connection: ConnectionID
        /// The highest server→agent seq written on this connection.
        var sentThrough: UInt64
        /// Unacknowledged DATA allowed in flight; nil when FLOW was not negotiated.
        var window: UInt32?
    }

    let key: SessionKey
    let service: Service
    /// The highest agent→server seq stored.
    var inboundLast: UInt64 = 0
    /// The highest server→agent seq assigned.
    var outboundLast: UInt64 = 0
    /// The highest server→agent seq the agent holds (ACK or RESUME_AFTER).
    var outboundAcked: UInt64 = 0
    /// Exactly the messages `outboundAcked + 1 ... outboundLast`, oldest first.
    var outbox = CircularBuffer<OutboundMessage>()
    var attachment: Attachment?

    init(key: SessionKey, service: Service) {
        self.key = key
        self.service = service
    }

    var record: SessionRecord {
        SessionRecord(key: key, service: service, inboundLast: inboundLast,
                      outboundLast: outboundLast, outboundAcked: outboundAcked)
    }
}

/// The durable part of a session, as the store keeps it.
struct SessionRecord: Hashable, Sendable {
    var key: SessionKey
    var service: Service
    var inboundLast: UInt64
    var outboundLast: UInt64
    var outboundAcked: UInt64
}
