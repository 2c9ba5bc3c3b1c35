@testable import IMAgentCore

extension ExpirySchedule {
    /// Where the schedule breaks its own invariant (see `ExpirySchedule`), given every
    /// deadline asked for since the timer last fired; empty when it holds.
    func audit(askedSinceFired deadlines: [Int64]) -> [String] {
        let earliest = deadlines.min()
        return timer == earliest ? [] : ["the timer is set for \(timer.map(String.init) ?? "nothing"), the earliest deadline asked is \(earliest.map(String.init) ?? "none")"]
    }
}

extension SessionRouter {
    /// Where the expiry schedule and the outbound queues disagree; empty when they agree:
    /// every session holding a message with a TTL is tracked, no closed one is, and the timer
    /// is set no later than the deadline of any message the server cannot hold. (A failed
    /// session sends nothing, and one whose OPEN_OK waits for the store keeps its window as
    /// LAST_ACKED found it: neither gives anything up meanwhile.)
    func expiryAudit() -> [String] {
        var problems: [String] = []
        let now = now.wallMS
        for session in table.all {
            let outbound = session.outbound
            let holdsTTLs = outbound.window.contains { $0.deadlineMS != nil } || outbound.storeDeadlineMS != nil || outbound.expiring != nil
            if holdsTTLs, !session.isFailed, !expiry.tracks(session.id) {
                problems.append("session \(session.id) holds messages with a TTL, and the schedule does not track it")
            }
            guard !session.isFailed, outbound.locating == nil else { continue }
            // Deadlines still ahead: one already passed is given up by the look under way (or its read's end).
            var ahead = outbound.window.compactMap { $0.seq > outbound.heldThroughSeq ? $0.deadlineMS : nil }
            if let deadline = outbound.storeDeadlineMS, outbound.hasMessagesAfterWindow, outbound.heldThroughSeq <= outbound.loadedThroughSeq {
                ahead.append(deadline)
            }
            if let earliest = ahead.filter({ $0 > now }).min(), (expiry.timer ?? .max) > earliest {
                problems.append("session \(session.id): a TTL passes at \(earliest), the timer is set for \(expiry.timer.map(String.init) ?? "nothing")")
            }
        }
        for id in expiry.sessions where table[id] == nil {
            problems.append("the schedule tracks session \(id), which is closed")
        }
        return problems
    }
}
