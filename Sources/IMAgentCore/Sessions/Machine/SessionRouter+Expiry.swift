import AgentIPC
import AgentStore

/// Expiry: outbound messages whose TTL passed before the server had them are given up. Which
/// sessions hold TTLs and when the timer fires is `ExpirySchedule`'s; which messages may go is
/// their `OutboundQueue`'s; here the two meet, and their results become actions.
extension SessionRouter {
    /// What a client reads about a message given up for its TTL.
    static var expiredReason: String { "its TTL passed before it reached the server" }

    /// Gives up the session's messages whose TTL passed and that the server
    /// is known not to have; returns the next deadline still ahead, if any.
    /// The window is looked at here; after it, the store finds them (`expireStored`).
    mutating func expire(_ id: UInt64, now: Int64) -> (actions: [SessionAction], next: Int64?) {
        guard let locating = table[id].map({ $0.outbound.locating != nil }) else {
            expiry.forget(id)
            return ([], nil)
        }
        // An OPEN_OK waiting for the store: the window must stay as LAST_ACKED found it.
        if locating { return ([], nil) }
        return table.modify(id) { session in
            var actions: [SessionAction] = []
            var (next, hasTTL) = session.outbound.expireWindow(now: now, budget: &budget) { seq in
                actions.append(tokens.store(.giveUpOutbound(session: id, seq: seq),
                                            then: .givenUp(session: id, seq: seq, code: .expired, reason: Self.expiredReason)))
            }
            actions += session.expireStored(now: now, tokens: &tokens, limits: limits)
            if let deadline = session.outbound.storeDeadlineMS {
                hasTTL = true
                if deadline > now { next = min(next ?? deadline, deadline) }
            }
            if !hasTTL, session.outbound.expiring == nil {
                expiry.forget(id)
            }
            return (actions, next)
        }!
    }

    /// The TTL timer fired: give up what is due, everywhere, and set the timer for the next deadline.
    mutating func expireAllDue() -> [SessionAction] {
        let now = now.wallMS
        var actions: [SessionAction] = []
        var next: Int64?
        for id in expiry.fire() {
            let (expired, due) = expire(id, now: now)
            actions += expired
            if let due { next = min(next ?? due, due) }
        }
        return actions + wakeExpiry(at: next)
    }

    /// `.expireAt` when the TTL timer must fire earlier than it is set to, for `deadline`.
    mutating func wakeExpiry(at deadline: Int64?) -> [SessionAction] {
        guard let deadline, let timer = expiry.wake(at: deadline) else { return [] }
        return [.expireAt(timer)]
    }

    /// The store gave up expired outbound messages after the window.
    mutating func forgetExpiredAfterWindow(session id: UInt64, token: UInt64,
                                           _ result: Result<ExpiredOutbound, SessionPersistenceError>) -> [SessionAction] {
        guard table[id]?.outbound.expiring == token else { return [] }  // closed
        let now = now.wallMS
        let actions = table.modify(id) { session in
            session.outbound.endStoreExpiry(try? result.get())
            var actions: [SessionAction] = []
            switch result {
            case .failure(let error):
                // Nothing was given up: try again in a second.
                actions.append(.log(.warning, "session \(id): expired messages not given up: \(error)"))
                if let timer = expiry.wake(at: now + 1_000) { actions.append(.expireAt(timer)) }
            case .success(let batch):
                for message in batch.messages {
                    actions.append(.log(.info, "session \(id): outbound seq \(message.seq) given up: \(Self.expiredReason)"))
                    if let client = session.attachedClient {
                        actions.append(.event(client: client, .expired(.init(session: id, seq: message.seq, code: .expired,
                                                                             message: Self.expiredReason))))
                    }
                }
                // A full batch: more may be due now. Otherwise, or when none is, the timer waits for the next.
                let more = batch.messages.count >= limits.expiryBatch ? session.expireStored(now: now, tokens: &tokens, limits: limits) : []
                actions += more
                if more.isEmpty, let next = batch.nextExpiryMS, let timer = expiry.wake(at: next) {
                    actions.append(.expireAt(timer))
                }
            }
            return actions
        }!
        return actions + transmit(id)
    }
}
