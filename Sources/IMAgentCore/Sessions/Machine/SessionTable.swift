import AgentIPC

/// Every session by id, and what is indexed by it: which client each is attached to,
/// the outbound bytes each uid has queued, the ids that must not be used again.
///
/// It owns those indexes' invariant: `byClient` lists exactly the sessions whose
/// `attachedClient` is that client, and `outboxBytesByUID` is the sum of the owner's
/// sessions' `outboxTotalBytes`. A session is changed only inside `modify` (or added and
/// removed here), which brings both up to date from what the change did, so no handler
/// has to remember them.
struct SessionTable {
    private(set) var sessions: [UInt64: Session] = [:]
    /// Sessions whose creation is being stored: their ids are taken; they join `sessions` once stored.
    private(set) var creating: [UInt64: Session] = [:]
    /// Closed ids, the most recent `ClosedSessionIDs.remembered`: not reused; OPEN of one answers SESSION_CLOSED.
    private(set) var closedIDs = ClosedSessionIDs()
    /// The sessions attached to each client: a client's events touch its sessions only,
    /// never a scan of every session.
    private(set) var byClient: [UInt64: Set<UInt64>] = [:]
    /// Outbound payload bytes queued (stored or being stored) per owner uid (`[limits] uid_outbox_bytes`).
    private(set) var outboxBytesByUID: [UInt32: Int] = [:]

    subscript(id: UInt64) -> Session? { sessions[id] }

    var count: Int { sessions.count }
    var isEmpty: Bool { sessions.isEmpty }
    var ids: Dictionary<UInt64, Session>.Keys { sessions.keys }
    var all: Dictionary<UInt64, Session>.Values { sessions.values }

    /// Whether any client holds a session (one being created included).
    var anyAttached: Bool { !byClient.isEmpty || creating.values.contains { $0.attachedClient != nil } }

    // MARK: Changing a session

    /// Changes session `id` in place, if it exists, and brings the indexes up to date.
    ///
    /// `body` changes the dictionary's own value (through `Values`' in-place accessor): a
    /// copy changed while the dictionary still held the original would copy its queues on
    /// the first write (copy on write), on the message path several times per message. The
    /// key is hashed once.
    @discardableResult
    mutating func modify<Result>(_ id: UInt64, _ body: (inout Session) throws -> Result) rethrows -> Result? {
        guard let index = sessions.index(forKey: id) else { return nil }
        let before = Self.indexed(&sessions.values[index])
        defer {
            let after = Self.indexed(&sessions.values[index])
            reindex(id, owner: before.owner, attached: before.attached, now: after.attached,
                    bytesBefore: before.bytes, bytesNow: after.bytes)
        }
        return try body(&sessions.values[index])
    }

    /// What the indexes keep of a session. The session is reached in place (`inout`), not
    /// copied: a copy costs a retain of every buffer it holds, and kept across `body` it would
    /// share the queues' storage and make `body`'s writes copy it.
    private static func indexed(_ session: inout Session) -> (owner: UInt32, attached: UInt64?, bytes: Int) {
        (session.owner, session.attachedClient, session.outboxTotalBytes)
    }

    private mutating func reindex(_ id: UInt64, owner: UInt32, attached before: UInt64?, now: UInt64?,
                                  bytesBefore: Int, bytesNow: Int) {
        if before != now {
            if let before {
                byClient[before]?.remove(id)
                if byClient[before]?.isEmpty == true { byClient[before] = nil }
            }
            if let now { byClient[now, default: []].insert(id) }
        }
        if bytesNow != bytesBefore {
            let total = outboxBytesByUID[owner, default: 0] + bytesNow - bytesBefore
            outboxBytesByUID[owner] = total == 0 ? nil : total
        }
    }

    // MARK: Life

    /// A stored session, at start-up.
    mutating func restore(_ session: Session) {
        precondition(session.attachedClient == nil, "a restored session is attached to no client")
        reindex(session.id, owner: session.owner, attached: nil, now: nil, bytesBefore: 0, bytesNow: session.outboxTotalBytes)
        sessions[session.id] = session
    }

    mutating func restoreClosed(_ ids: some Sequence<UInt64>) {
        closedIDs = ClosedSessionIDs(ids)
    }

    /// A new session whose creation is being stored.
    mutating func beginCreating(_ session: Session) {
        creating[session.id] = session
    }

    /// Its creation is stored (`stored`: it joins the table) or failed (it is forgotten).
    mutating func endCreating(_ id: UInt64, stored: Bool, change: (inout Session) -> Void = { _ in }) -> Session? {
        guard var session = creating.removeValue(forKey: id) else { return nil }
        guard stored else { return session }
        change(&session)
        reindex(id, owner: session.owner, attached: nil, now: session.attachedClient, bytesBefore: 0, bytesNow: session.outboxTotalBytes)
        sessions[id] = session
        return session
    }

    /// The client of a session being created is gone: the session will be created detached.
    mutating func forgetCreatingClient(_ client: UInt64) {
        for (id, session) in creating where session.attachedClient == client { creating[id]?.attachedClient = nil }
    }

    /// Forgets a session for good and keeps its id reserved.
    mutating func close(_ id: UInt64) -> Session? {
        guard let session = sessions.removeValue(forKey: id) else { return nil }
        reindex(id, owner: session.owner, attached: session.attachedClient, now: nil,
                bytesBefore: session.outboxTotalBytes, bytesNow: 0)
        closedIDs.insert(id)
        return session
    }

    /// A new session id: not 0, not in use, not closed recently.
    func newID(_ random: inout some RandomNumberGenerator) -> UInt64 {
        while true {
            let id = random.next()
            if id != 0, sessions[id] == nil, creating[id] == nil, !closedIDs.contains(id) { return id }
        }
    }

    // MARK: Who may use a session

    struct Refusal: Error {
        var code: IPCErrorCode
        var text: String
    }

    /// The session, if `client` may use it: its owner's uid, or an admin.
    func authorize(_ client: SessionClient, _ id: UInt64) -> Result<Session, Refusal> {
        guard id != 0, let session = sessions[id] else {
            if closedIDs.contains(id) { return .failure(Refusal(code: .sessionClosed, text: "session \(id) is closed")) }
            return .failure(Refusal(code: .unknownSession, text: "no session \(id)"))
        }
        guard session.owner == client.uid || client.isAdmin else {
            return .failure(Refusal(code: .permissionDenied, text: "session \(id) belongs to another user"))
        }
        return .success(session)
    }

    /// Why `client` may not use session `id`, or nil when it may (`authorize` without a copy of the session).
    func refusal(_ client: SessionClient, _ id: UInt64) -> Refusal? {
        guard id != 0, let owner = sessions[id]?.owner else {
            if closedIDs.contains(id) { return Refusal(code: .sessionClosed, text: "session \(id) is closed") }
            return Refusal(code: .unknownSession, text: "no session \(id)")
        }
        guard owner == client.uid || client.isAdmin else {
            return Refusal(code: .permissionDenied, text: "session \(id) belongs to another user")
        }
        return nil
    }

    /// Sessions `uid` holds, those being created included.
    func count(ownedBy uid: UInt32) -> Int {
        sessions.values.reduce(0) { $0 + ($1.owner == uid ? 1 : 0) } + creating.values.reduce(0) { $0 + ($1.owner == uid ? 1 : 0) }
    }

    // MARK: Order

    /// Every session id, high priority before normal before low; ids break ties so the order
    /// is stable. Sorts keys, not sessions: moving whole `Session` values is costly.
    var idsByPriority: [UInt64] {
        sessions.map { (priority: $0.value.priority.rawValue, id: $0.key) }.sorted { ($0.priority, $0.id) < ($1.priority, $1.id) }.map(\.id)
    }

    /// `ids` of sessions in the table in the same order.
    func byPriority(_ ids: some Sequence<UInt64>) -> [UInt64] {
        ids.compactMap { id in sessions[id].map { (priority: $0.priority.rawValue, id: id) } }
            .sorted { ($0.priority, $0.id) < ($1.priority, $1.id) }.map(\.id)
    }
}
