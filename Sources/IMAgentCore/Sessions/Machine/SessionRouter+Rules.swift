import AgentIPC
import IMLink
import NIOCore

/// Replies and frames built from a session, and closing one: shared by every event.
extension SessionRouter {
    /// Forgets a session for good and keeps its id reserved.
    mutating func closeLocally(_ id: UInt64, tellUpstream: Bool, reason: String,
                               then continuation: StoreContinuation) -> [SessionAction] {
        guard var session = table.close(id) else { return [] }
        budget.forget(&session)
        expiry.forget(id)
        var actions: [SessionAction] = [.watch(SessionChange(.closed, session, state: .closed, reason: reason))]
        for waiter in holds.takeAttaches(id) {
            actions.append(.fail(client: waiter.client, request: waiter.request, .sessionClosed, "session \(id) was closed"))
        }
        if tellUpstream, !session.isFailed {
            if link != nil { actions.append(.send(.close(Close(session: id)))) } else { owed.close(id) }
        }
        actions.append(tokens.store(.closeSession(id), then: continuation))
        return actions
    }

    /// Why `uid` may not open one more session ([limits] max_sessions_per_uid), or nil.
    /// Root is bounded by `max_sessions` only.
    func perUIDSessionRefusal(_ uid: UInt32) -> String? {
        guard uid != 0, table.count(ownedBy: uid) >= limits.maxSessionsPerUID else { return nil }
        return "uid \(uid) already holds \(limits.maxSessionsPerUID) sessions ([limits] max_sessions_per_uid); close some first"
    }
}
