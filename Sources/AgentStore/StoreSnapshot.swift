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

/// The whole persisted state at start-up: what the daemon rebuilds its sessions from.
public struct StoreSnapshot: Sendable, Hashable {
    /// Every session ever created, closed ones included (their ids stay reserved,
    /// and OPEN of a closed id must answer SESSION_CLOSED), ordered by id.
    public var sessions: [StoredSession]
    /// Every metadata key and value.
    public var metadata: [String: String]

    public init(sessions: [StoredSession], metadata: [String: String]) {
        self.sessions = sessions
        self.metadata = metadata
    }
}

/// One queued outbound message without its payload: what start-up keeps in memory.
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

/// One session as `loadIndex` returns it: its row, its outbox without payloads,
/// and the size of its inbox (whose seqs are `deliveredSeq + 1 … receivedSeq`).
public struct IndexedSession: Sendable, Hashable {
    public var record: SessionRecord
    /// Unacknowledged outbound messages in seq order, without payloads.
    public var outbox: [OutboundIndexEntry]
    /// Bytes of payload in the inbox.
    public var inboxBytes: Int

    public init(record: SessionRecord, outbox: [OutboundIndexEntry] = [], inboxBytes: Int = 0) {
        self.record = record
        self.outbox = outbox
        self.inboxBytes = inboxBytes
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
