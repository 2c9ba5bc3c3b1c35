/// A session's lifecycle as the store keeps it. The link-level states
/// (pending, paused) are the router's business and never stored: after a
/// restart every open session is re-opened upstream anyway.
public enum StoredSessionState: String, Sendable, Hashable, CaseIterable {
    /// Usable: messages may be appended in both directions.
    case open
    /// The server refused the session (OPEN_FAIL); its queues are kept so the
    /// owner can still read what arrived, but nothing new is accepted.
    case failed
    /// Ended for good by CLOSE: queues purged, the id stays reserved forever so
    /// it is never handed to another session.
    case closed
}

/// One session's row: identity, owner, and the four sequence counters that
/// make delivery exactly-once (wire.md §5, ipc.md §6).
public struct SessionRecord: Sendable, Hashable {
    /// Non-zero, never reused (stored as the Int64 with the same bit pattern).
    public var id: UInt64
    /// The service named in OPEN.
    public var service: String
    /// The uid of the creating client; only it (or an admin) may use the session.
    public var ownerUID: UInt32
    /// The IPC PRIORITY value: 0 high, 1 normal, 2 low.
    public var priority: UInt8
    /// Keep inbound messages while no client is attached (IPC DURABLE).
    public var durable: Bool
    public var state: StoredSessionState
    /// The code the server gave when it refused the session (set by `failSession`).
    public var failureCode: UInt16?
    /// Highest outbound seq assigned (and stored); the next outbound message is `sentSeq + 1`.
    public var sentSeq: UInt64
    /// Highest outbound seq the server acknowledged; the outbox holds `ackedSeq+1 ... sentSeq`
    /// minus any that expired.
    public var ackedSeq: UInt64
    /// Highest inbound seq stored; OPEN's RESUME_AFTER.
    public var receivedSeq: UInt64
    /// Highest inbound seq a client acknowledged; the inbox holds `deliveredSeq+1 ... receivedSeq`.
    public var deliveredSeq: UInt64
    /// Creation time, milliseconds since the Unix epoch.
    public var createdMS: Int64
    /// Outbound messages given up before the server had them (`giveUpOutbound`).
    public var givenUp: UInt64 = 0

    public init(id: UInt64, service: String, ownerUID: UInt32, priority: UInt8, durable: Bool,
                state: StoredSessionState = .open, failureCode: UInt16? = nil,
                sentSeq: UInt64 = 0, ackedSeq: UInt64 = 0, receivedSeq: UInt64 = 0, deliveredSeq: UInt64 = 0,
                createdMS: Int64) {
        self.id = id
        self.service = service
        self.ownerUID = ownerUID
        self.priority = priority
        self.durable = durable
        self.state = state
        self.failureCode = failureCode
        self.sentSeq = sentSeq
        self.ackedSeq = ackedSeq
        self.receivedSeq = receivedSeq
        self.deliveredSeq = deliveredSeq
        self.createdMS = createdMS
    }
}
