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
