/// One session with everything still queued for it, as `load()` returns it.
public struct StoredSession: Sendable, Hashable {
    public var record: SessionRecord
    /// Unacknowledged outbound messages in seq order.
    public var outbox: [OutboundMessage]
    /// Inbound messages not yet acknowledged by a client, in seq order.
    public var inbox: [InboundMessage]

    public init(record: SessionRecord, outbox: [OutboundMessage] = [], inbox: [InboundMessage] = []) {
        self.record = record
        self.outbox = outbox
        self.inbox = inbox
    }
}

/// The whole persisted state with every payload: for inspection and tests (the daemon
/// starts from `StoreIndex`, which holds no message, so its memory does not grow with the queue).
public struct StoreSnapshot: Sendable, Hashable {
    /// Every session ever created, closed ones included (their ids stay reserved,
    /// and OPEN of a closed id must answer SESSION_CLOSED), ordered by id.
    public var sessions: [StoredSession]

    public init(sessions: [StoredSession]) {
        self.sessions = sessions
    }
}

/// One queued outbound message without its payload.
public struct OutboundIndexEntry: Sendable, Hashable {
    public var seq: UInt64
    /// The payload's length.
    public var bytes: Int
    /// When the message expires (ms since the Unix epoch), or nil for never.
    public var expiresAtMS: Int64?

    public init(seq: UInt64, bytes: Int, expiresAtMS: Int64? = nil) {
        self.seq = seq
        self.bytes = bytes
        self.expiresAtMS = expiresAtMS
    }
}

/// One session as `loadIndex` returns it: its row and the size of its queues, never a
/// message (the inbox's seqs are `deliveredSeq + 1 … receivedSeq`).
public struct IndexedSession: Sendable, Hashable {
    public var record: SessionRecord
    /// Outbound messages stored and not acknowledged (those given up are deleted).
    public var outboxCount: Int
    /// Their payload bytes.
    public var outboxBytes: Int
    /// The earliest expiry among them (ms since the Unix epoch), or nil when none has a TTL.
    public var outboxEarliestExpiryMS: Int64?
    /// Bytes of payload in the inbox.
    public var inboxBytes: Int

    public init(record: SessionRecord, outboxCount: Int = 0, outboxBytes: Int = 0, outboxEarliestExpiryMS: Int64? = nil,
                inboxBytes: Int = 0) {
        self.record = record
        self.outboxCount = outboxCount
        self.outboxBytes = outboxBytes
        self.outboxEarliestExpiryMS = outboxEarliestExpiryMS
        self.inboxBytes = inboxBytes
    }
}

/// What `giveUpExpiredOutbound` did: the messages it gave up, in seq order, and the next
/// expiry of the session's messages after the range it looked at.
public struct ExpiredOutbound: Sendable, Hashable {
    /// Seq and payload bytes of each message given up (`expiresAtMS` is its expiry).
    public var messages: [OutboundIndexEntry]
    public var nextExpiryMS: Int64?

    public init(messages: [OutboundIndexEntry], nextExpiryMS: Int64?) {
        self.messages = messages
        self.nextExpiryMS = nextExpiryMS
    }
}

/// The first messages of an outbox range (see `outboundSpan`).
public struct OutboundSpan: Sendable, Hashable {
    /// How many were found (at most the count asked for).
    public var count: Int
    /// The seq of the last of them (the range's start when none was found).
    public var lastSeq: UInt64
    /// Their payload bytes.
    public var bytes: Int

    public init(count: Int, lastSeq: UInt64, bytes: Int) {
        self.count = count
        self.lastSeq = lastSeq
        self.bytes = bytes
    }
}

/// What the daemon starts from: every session (closed ones too, ordered by id) with
/// counters and an index of its queues — never a payload.
public struct StoreIndex: Sendable, Hashable {
    public var sessions: [IndexedSession]

    public init(sessions: [IndexedSession]) {
        self.sessions = sessions
    }
}
