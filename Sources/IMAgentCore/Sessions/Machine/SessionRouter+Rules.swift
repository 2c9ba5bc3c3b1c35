import AgentIPC
import IMLink
import NIOCore

/// Lookups, permissions and bookkeeping shared by every event.
extension SessionRouter {
    struct Refusal: Error {
        var code: IPCErrorCode
        var text: String
    }

    /// Why `client` may not use session `id`, or nil when it may (see `authorize`).
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

    /// Takes session `id` (which must exist) out of `sessions` to change it; put it
    /// back with `sessions[id] = session` before anything else looks it up.
    ///
    /// `var session = sessions[id]; …; sessions[id] = session` changes a copy while
    /// the dictionary still holds the original, so the first change to a queue or
    /// a `storing` table copies all of it (copy on write): on the message path that
    /// was a copy of up to a window of entries per message, several times over.
    mutating func take(_ id: UInt64) -> Session {
        guard let session = sessions.removeValue(forKey: id) else {
            preconditionFailure("session \(id) was looked up a moment ago")
        }
        return session
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

    mutating func newID() -> UInt64 {
        while true {
            let id = random.next()
            if id != 0, sessions[id] == nil, creating[id] == nil, !closedIDs.contains(id) { return id }
        }
    }

    mutating func takeToken() -> UInt64 {
        nextToken += 1
        return nextToken
    }

    /// High before normal before low; ids break ties so the order is stable. Sorts keys,
    /// not sessions: moving whole `Session` values made this the daemon's hottest path.
    var sessionIDsByPriority: [UInt64] {
        sessions.map { (priority: $0.value.priority.rawValue, id: $0.key) }.sorted { ($0.priority, $0.id) < ($1.priority, $1.id) }.map(\.id)
    }

    /// `ids` of sessions in the table in the same order.
    func byPriority(_ ids: Set<UInt64>) -> [UInt64] {
        ids.compactMap { id in sessions[id].map { (priority: $0.priority.rawValue, id: id) } }
            .sorted { ($0.priority, $0.id) < ($1.priority, $1.id) }.map(\.id)
    }

    /// Session `id` is no longer attached to `client`.
    mutating func detachIndex(_ client: UInt64, _ id: UInt64) {
        sessionsByClient[client]?.remove(id)
        if sessionsByClient[client]?.isEmpty == true { sessionsByClient[client] = nil }
    }

    func opened(_ session: Session) -> IPCMessage.Opened {
        IPCMessage.Opened(session: session.id, sessionState: session.state, sentSeq: session.sentSeq,
                          ackedSeq: session.ackedSeq, deliveredSeq: session.deliveredSeq)
    }

    func openFrame(_ session: Session) -> Open {
        let window: UInt32? = link?.flow == true ? (session.pausedUpstream ? 0 : Session.defaultWindow) : nil
        return Open(session: session.id, service: session.service, resumeAfter: session.receivedSeq, window: window)
    }

    /// Forgets a session for good and keeps its id reserved.
    mutating func closeLocally(_ id: UInt64, tellUpstream: Bool, reason: String,
                                       then continuation: PersistContinuation) -> [SessionAction] {
        guard var session = sessions.removeValue(forKey: id) else { return [] }
        if let client = session.attachedClient { detachIndex(client, id) }
        outboxBytesByUID[session.owner, default: 0] -= session.outboxTotalBytes
        if outboxBytesByUID[session.owner] == 0 { outboxBytesByUID[session.owner] = nil }
        budget.forget(&session)
        closedIDs.insert(id)
        var actions: [SessionAction] = [.watch(SessionChange(.closed, session, state: .closed, reason: reason))]
        for waiter in attachesAwaitingStores.removeValue(forKey: id) ?? [] {
            actions.append(.fail(client: waiter.client, request: waiter.request, .sessionClosed, "session \(id) was closed"))
        }
        if tellUpstream, !session.isFailed {
            if link != nil { actions.append(.send(.close(Close(session: id)))) } else { closeUpstream.insert(id) }
        }
        actions.append(.persist(.close(session: id), then: continuation))
        return actions
    }
}
