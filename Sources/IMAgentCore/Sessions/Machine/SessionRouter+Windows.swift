import AgentIPC
import IMLink
import NIOCore

/// What of each queue is in memory: reads of the store that refill the windows, within
/// the room `MemoryBudget` gives.
extension SessionRouter {
    // MARK: Windows

    /// Forgets the inbound window (after an attach, a detach): it is read again from the store.
    mutating func resetInboundWindow(_ session: inout Session) {
        budget.dropInboundWindow(of: &session)
    }

    /// Gives back every byte the session holds in memory; its queues stay in the store.
    mutating func releaseWindows(_ session: inout Session) {
        budget.dropWindows(of: &session)
        session.loadedThroughSeq = session.ackedSeq
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
        let room = budget.room(for: session)
        if pendingInMemory > 0, room < budget.sessionShare / 4 { return [] }
        // The one message of an empty budget always may come, however large.
        guard room > 0 || budget.held == 0 else {
            budget.wait(session.id)
            return []
        }
        let reserved = max(room, 0)
        let token = takeToken()
        budget.beginRead(\.outboundLoad, reserving: reserved, token: token, in: &session)
        return [.loadOutbound(session: session.id, after: session.loadedThroughSeq, limit: limits.readBatch,
                              maxBytes: max(reserved, 1), token: token)]
    }

    /// Reads the next inbound messages from the store for an attached, reading client.
    mutating func refillInbound(_ session: inout Session) -> [SessionAction] {
        guard let client = session.attachedClient, !blockedClients.contains(client), session.inboundLoad == nil,
              attachesAwaitingStores[session.id] == nil else { return [] }
        let windowEnd = session.dispatchedSeq + UInt64(session.inbox.count)
        guard windowEnd < session.receivedSeq, session.inbox.count < limits.deliveryBatch else { return [] }
        let room = budget.room(for: session, cap: 2 * limits.deliveryBatchBytes)
        guard room > 0 || budget.held == 0 else {
            budget.wait(session.id)
            return []
        }
        let reserved = max(room, 0)
        let token = takeToken()
        budget.beginRead(\.inboundLoad, reserving: reserved, token: token, in: &session)
        return [.loadInbound(session: session.id, after: windowEnd, limit: 2 * limits.deliveryBatch,
                             maxBytes: max(reserved, 1), token: token)]
    }
}
