import AgentIPC
import IMLink
import NIOCore

/// The memory budget: what of each queue is in memory, and reads of the store to refill it.
extension SessionRouter {
    // MARK: Memory windows

    /// Whether `bytes` more may come into memory for `session` (the one message of an
    /// empty budget always may, however large).
    func fits(_ bytes: Int, _ session: Session) -> Bool {
        if windowBytes == 0 { return true }
        return windowBytes + bytes <= limits.memoryBudgetBytes && session.windowBytes + bytes <= limits.sessionShareBytes
    }

    /// Forgets the inbound window (after an attach, a detach): it is read again from the store.
    mutating func resetInboundWindow(_ session: inout Session) {
        windowBytes -= session.inboxWindowBytes + (session.inboundLoad?.reserved ?? 0)
        session.inbox.removeAll()
        session.inboxWindowBytes = 0
        session.inboundLoad = nil
    }

    /// Gives back every byte the session holds in memory; its queues stay in the store.
    mutating func releaseWindows(_ session: inout Session) {
        resetInboundWindow(&session)
        windowBytes -= session.loadedBytes + (session.outboundLoad?.reserved ?? 0)
        session.outboxWindow.removeAll()
        session.loadedThroughSeq = session.ackedSeq
        session.loadedBytes = 0
        session.outboundLoad = nil
        session.locating = nil
        session.transmittedCount = 0
    }

    /// Reads the next outbound messages from the store when the session can send and its
    /// window has room; otherwise it waits for room in the budget.
    mutating func refillOutbound(_ session: inout Session) -> [SessionAction] {
        guard session.upstream == .open, session.outboundLoad == nil, session.expiring == nil,
              session.outboxWindow.count < session.outboxStored else { return [] }
        // Read in batches: with messages still to send in memory, wait until a quarter of the share is free.
        let pendingInMemory = session.outboxWindow.count - session.transmittedCount
        let room = min(limits.memoryBudgetBytes - windowBytes, limits.sessionShareBytes - session.windowBytes)
        if pendingInMemory > 0, room < limits.sessionShareBytes / 4 { return [] }
        // The one message of an empty budget always may come, however large.
        guard room > 0 || windowBytes == 0 else {
            budgetWaiters.insert(session.id)
            return []
        }
        // Not taken out of `budgetWaiters` here: the session may wait there for its inbound
        // window too (one set for both), and only a wake-up tells a waiter it is done.
        let reserved = max(room, 0)
        let token = takeToken()
        session.outboundLoad = Session.Load(token: token, reserved: reserved)
        windowBytes += reserved
        return [.loadOutbound(session: session.id, after: session.loadedThroughSeq, limit: limits.readBatch,
                              maxBytes: max(reserved, 1), token: token)]
    }

    /// Reads the next inbound messages from the store for an attached, reading client.
    mutating func refillInbound(_ session: inout Session) -> [SessionAction] {
        guard let client = session.attachedClient, !blockedClients.contains(client), session.inboundLoad == nil,
              attachesAwaitingStores[session.id] == nil else { return [] }
        let windowEnd = session.dispatchedSeq + UInt64(session.inbox.count)
        guard windowEnd < session.receivedSeq, session.inbox.count < limits.deliveryBatch else { return [] }
        let room = min(limits.memoryBudgetBytes - windowBytes, limits.sessionShareBytes - session.windowBytes,
                       2 * limits.deliveryBatchBytes)
        guard room > 0 || windowBytes == 0 else {
            budgetWaiters.insert(session.id)
            return []
        }
        let reserved = max(room, 0)  // (see `refillOutbound` on `budgetWaiters`)
        let token = takeToken()
        session.inboundLoad = Session.Load(token: token, reserved: reserved)
        windowBytes += reserved
        return [.loadInbound(session: session.id, after: windowEnd, limit: 2 * limits.deliveryBatch,
                             maxBytes: max(reserved, 1), token: token)]
    }

    /// Room freed in the budget: the sessions that waited for it read on, by priority.
    ///
    /// Every event that lowers `windowBytes` calls this (a finished read, a delivery, an ACK
    /// either way, an attach or detach, a message given up, a session closed or refused):
    /// a waiter has nothing else to wake it, and would keep its queue in the store while
    /// the link idles. It waits until a quarter of a share is free (or nothing is held), so
    /// that a full budget freed one ACK at a time does not turn into one read per message.
    mutating func wakeBudgetWaiters() -> [SessionAction] {
        guard !budgetWaiters.isEmpty,
              windowBytes == 0 || limits.memoryBudgetBytes - windowBytes >= limits.sessionShareBytes / 4 else { return [] }
        let waiting = budgetWaiters.compactMap { id in sessions[id].map { (priority: $0.priority.rawValue, id: id) } }
            .sorted { ($0.priority, $0.id) < ($1.priority, $1.id) }.map(\.id)
        budgetWaiters.removeAll()
        var actions: [SessionAction] = []
        for id in waiting {
            var session = take(id)
            actions += refillOutbound(&session)
            actions += refillInbound(&session)
            sessions[id] = session
            actions += transmit(id) + deliver(id)
        }
        return actions
    }

    /// `sessionsActive` whenever whether any client holds a session changes.
    mutating func finish(_ actions: [SessionAction]) -> [SessionAction] {
        let active = !sessionsByClient.isEmpty || creating.values.contains { $0.attachedClient != nil }
        guard active != reportedActive else { return actions }
        reportedActive = active
        return actions + [.sessionsActive(active)]
    }
}
