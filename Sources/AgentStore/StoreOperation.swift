import NIOCore

/// One thing the daemon asks the store to do. Operations submitted together
/// (one `perform` call) are applied atomically: all of them or none. Many
/// submissions share one transaction (group commit), each inside its own
/// savepoint, so one submission's mistake never fails another's.
public enum StoreOperation: Sendable, Hashable {
    /// Creates an open session; `id` nil draws one in the same transaction. → `.session`
    case createSession(id: UInt64?, service: String, ownerUID: UInt32, priority: UInt8, durable: Bool, createdAtMS: Int64)
    /// Stores outbound message `seq`, which must be `sentSeq + 1`; sets `sentSeq`. `payloadCRC`,
    /// when given, is the payload's CRC-32C, recorded for a large payload instead of computed
    /// again. → `.done`
    case appendOutbound(session: UInt64, seq: UInt64, payload: ByteBuffer, expiresAtMS: Int64?, payloadCRC: UInt32? = nil)
    /// The server acknowledged every outbound seq up to `upTo`: deletes them, sets `ackedSeq`. → `.done`
    case markAcked(session: UInt64, upTo: UInt64)
    /// Stores inbound message `seq`, which must be `receivedSeq + 1`; sets `receivedSeq`;
    /// `payloadCRC` as for `appendOutbound`. → `.done`
    case appendInbound(session: UInt64, seq: UInt64, payload: ByteBuffer, payloadCRC: UInt32? = nil)
    /// A client acknowledged every inbound seq up to `upTo`: deletes them, sets `deliveredSeq`. → `.done`
    case markDelivered(session: UInt64, upTo: UInt64)
    /// Marks the session failed with the server's code; its queues are kept. → `.done`
    case failSession(UInt64, code: UInt16?)
    /// Ends the session for good: purges both queues, state closed, id stays reserved. → `.done`
    case closeSession(UInt64)
    /// Deletes one outbound message the server never had (its TTL passed, or it is too
    /// large for the server) and counts it in the session's `givenUp`. → `.done`
    case giveUpOutbound(session: UInt64, seq: UInt64)
    /// Gives up (deletes and counts in `givenUp`) up to `limit` outbound messages of one session
    /// after seq `after` whose expiry is at or before `nowMS`, and finds the next expiry after
    /// `after` still ahead: an indexed range, not a scan of the queue. → `.expiredOutbound`
    case giveUpExpiredOutbound(session: UInt64, after: UInt64, nowMS: Int64, limit: Int)
    /// The last seq and the payload bytes of the first `count` outbound messages after `after`
    /// (fewer when fewer are stored): what a cumulative ACK beyond the daemon's window covers. → `.outboundSpan`
    case outboundSpan(session: UInt64, after: UInt64, count: Int)
    /// Reads one session's row. → `.sessionRecord`
    case session(UInt64)
    /// Reads up to `limit` outbound messages after `after`, in seq order (resend after OPEN_OK),
    /// stopping once `maxBytes` of payload are read (at least one message). → `.outbound`
    case outbound(session: UInt64, after: UInt64, limit: Int, maxBytes: Int)
    /// Reads up to `limit` inbound messages after `after`, in seq order (redelivery after attach),
    /// stopping once `maxBytes` of payload are read (at least one message). → `.inbound`
    case inbound(session: UInt64, after: UInt64, limit: Int, maxBytes: Int)
    /// Reads everything: every session with its queues. → `.snapshot`
    case load
    /// Reads every session with its counters and what is queued, without payloads:
    /// the daemon's start-up, whose memory must not grow with the queue. → `.index`
    case loadIndex

    /// Whether applying this can make the database file bigger. When the store is
    /// full, operations that cannot are retried alone, so acknowledgements and
    /// closes still free space while appends are refused.
    var mayGrowDatabase: Bool {
        switch self {
        case .createSession, .appendOutbound, .appendInbound: true
        case .markAcked, .markDelivered, .failSession, .closeSession, .giveUpOutbound,
             .giveUpExpiredOutbound, .outboundSpan,
             .session, .outbound, .inbound, .load, .loadIndex: false
        }
    }
}

/// What one `StoreOperation` produced, in the same position as its operation.
public enum StoreResult: Sendable, Hashable {
    case done
    case session(SessionRecord)
    case sessionRecord(SessionRecord?)
    case expiredOutbound(ExpiredOutbound)
    case outboundSpan(OutboundSpan)
    case outbound([OutboundMessage])
    case inbound([InboundMessage])
    case snapshot(StoreSnapshot)
    case index(StoreIndex)
}
