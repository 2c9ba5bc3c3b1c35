import AgentIPC
import IMLink
import NIOCore

/// What needs both a session's state and one of its queues: read the next messages of either
/// window from the store, ask the store to expire what is after the outbound window, drop an
/// unattended inbox, pause upstream. Each works on this session alone, with the budget and the
/// tokens passed in, so the router can run it while the session is out of its table.
extension Session {
    /// Reads the next outbound messages from the store when the session can send and its
    /// window has room; otherwise it waits for room in the budget.
    mutating func refillOutbound(budget: inout MemoryBudget, tokens: inout Tokens, limits: SessionLimits) -> [SessionAction] {
        guard upstream == .open,
              let read = outbound.beginRead(session: id, inboundBytes: inbound.memoryBytes, tokens: &tokens, budget: &budget) else { return [] }
        return [.store(.outbound(session: id, after: read.after, limit: limits.readBatch, maxBytes: max(read.maxBytes, 1)),
                       tag: read.token, then: .outboundRead(session: id))]
    }

    /// Reads the next inbound messages from the store for an attached client that is reading.
    mutating func refillInbound(reading: Bool, budget: inout MemoryBudget, tokens: inout Tokens, limits: SessionLimits) -> [SessionAction] {
        guard reading, attachedClient != nil,
              let read = inbound.beginRead(session: id, batch: limits.deliveryBatch, batchBytes: limits.deliveryBatchBytes,
                                           outboundBytes: outbound.memoryBytes, tokens: &tokens, budget: &budget) else { return [] }
        return [.store(.inbound(session: id, after: read.after, limit: 2 * limits.deliveryBatch, maxBytes: max(read.maxBytes, 1)),
                       tag: read.token, then: .inboundRead(session: id))]
    }

    /// Asks the store to give up the expired messages after the window when it may
    /// (`OutboundQueue.beginStoreExpiry`).
    mutating func expireStored(now: Int64, tokens: inout Tokens, limits: SessionLimits) -> [SessionAction] {
        guard let expiry = outbound.beginStoreExpiry(now: now, tokens: &tokens) else { return [] }
        return [.store(.giveUpExpiredOutbound(session: id, after: expiry.after, nowMS: now, limit: limits.expiryBatch),
                       tag: expiry.token, then: .expiredGivenUp(session: id))]
    }

    /// Gives back every byte the session holds in memory; its queues stay in the store.
    mutating func releaseWindows(budget: inout MemoryBudget) {
        inbound.dropWindow(budget: &budget)
        outbound.dropWindow(budget: &budget)
    }

    /// DURABLE = 0 keeps nothing for a client that is not there: with no client attached,
    /// the inbox is dropped (marked delivered) as soon as it is stored, stored only so that
    /// the server's ACK and RESUME_AFTER stay right.
    mutating func dropUnattended(flow: Bool, budget: inout MemoryBudget, tokens: inout Tokens) -> [SessionAction] {
        guard !durable, attachedClient == nil, inbound.count > 0 else { return [] }
        let seq = inbound.dropAll(budget: &budget)
        var actions = [tokens.store(.markDelivered(session: id, upTo: seq), then: .deliveredStored(session: id, seq: seq))]
        if inbound.resume(), upstream == .open, flow {
            actions.append(.send(.window(WindowUpdate(session: id, window: Session.defaultWindow))))
        }
        return actions
    }

    /// With FLOW: WINDOW 0 once the messages stored or being stored reach `limit`
    /// (`[limits] inbox_messages`). Counted as DATA arrives, not once it is stored, so a burst
    /// cannot pass the limit while the store catches up; the server stops, and over MQTT the
    /// adapter refuses what the broker sends beyond it. A session that keeps nothing for an
    /// absent client (DURABLE = 0, detached) is never paused: what it stores is dropped at once.
    mutating func pauseIfInboxFull(limit: Int) -> [SessionAction] {
        guard !inbound.pausedUpstream, durable || attachedClient != nil, inbound.count + inbound.storingCount >= limit,
              inbound.pause() else { return [] }
        var actions: [SessionAction] = []
        if upstream == .open {
            actions.append(.send(.window(WindowUpdate(session: id, window: 0))))
        }
        if let client = attachedClient {
            actions.append(.event(client: client, .sessionState(.init(session: id, state: state))))
        }
        actions.append(.watch(SessionChange(.state, self, reason: "the inbox is full")))
        return actions
    }
}
