import AgentIPC
import IMLink
import NIOCore

/// What one session's queues do on their own: give up an outbound message, read the next
/// messages of either window from the store, ask the store to expire what is after the
/// window, drop an unattended inbox. Each works on this session alone, with the budget and
/// the tokens passed in, so the router can run it while the session is out of its table.
extension Session {
    /// Forgets the outbox entry at `offset` (not on the current link, not held by the server)
    /// and tells its client once that is stored.
    mutating func giveUp(at offset: Int, code: IPCErrorCode, reason: String, budget: inout MemoryBudget,
                         tokens: inout Tokens) -> [SessionAction] {
        let entry = outboxWindow.remove(at: outboxWindow.index(outboxWindow.startIndex, offsetBy: offset))
        givenUp += 1
        outboxStored -= 1
        outboxBytes -= entry.bytes
        budget.releaseOutbound(Session.windowCost(entry.payload), from: &self)
        return [tokens.store(.giveUpOutbound(session: id, seq: entry.seq),
                             then: .givenUp(session: id, seq: entry.seq, code: code, reason: reason))]
    }

    /// Reads the next outbound messages from the store when the session can send and its
    /// window has room; otherwise it waits for room in the budget.
    mutating func refillOutbound(budget: inout MemoryBudget, tokens: inout Tokens, limits: SessionLimits) -> [SessionAction] {
        guard upstream == .open, outboundLoad == nil, expiring == nil, outboxWindow.count < outboxStored else { return [] }
        // Read in batches: with messages still to send in memory, wait until a quarter of the share is free.
        let pendingInMemory = outboxWindow.count - transmittedCount
        if pendingInMemory > 0, budget.room(for: self) < budget.sessionShare / 4 { return [] }
        let token = tokens.next()
        guard let reserved = budget.beginRead(\.outboundLoad, token: token, in: &self) else { return [] }
        return [.store(.outbound(session: id, after: loadedThroughSeq, limit: limits.readBatch, maxBytes: max(reserved, 1)),
                       tag: token, then: .outboundRead(session: id))]
    }

    /// Reads the next inbound messages from the store for an attached client that is reading.
    mutating func refillInbound(reading: Bool, budget: inout MemoryBudget, tokens: inout Tokens, limits: SessionLimits) -> [SessionAction] {
        guard reading, attachedClient != nil, inboundLoad == nil else { return [] }
        let windowEnd = handedOverSeq + UInt64(inbox.count)
        guard windowEnd < receivedSeq, inbox.count < limits.deliveryBatch else { return [] }
        let token = tokens.next()
        guard let reserved = budget.beginRead(\.inboundLoad, cap: 2 * limits.deliveryBatchBytes, token: token, in: &self) else { return [] }
        return [.store(.inbound(session: id, after: windowEnd, limit: 2 * limits.deliveryBatch, maxBytes: max(reserved, 1)),
                       tag: token, then: .inboundRead(session: id))]
    }

    /// Asks the store to give up the expired messages after the window, when one may have
    /// expired and nothing else reads or changes what is after the window meanwhile.
    /// (Before a restart's first OPEN_OK the server may hold them all: nothing expires.)
    mutating func expireStored(now: Int64, tokens: inout Tokens, limits: SessionLimits) -> [SessionAction] {
        guard expiring == nil else { return [] }
        guard outboxWindow.count < outboxStored else {
            storeDeadlineMS = nil  // everything stored is in the window
            return []
        }
        guard let deadline = storeDeadlineMS, deadline <= now, outboundLoad == nil, locating == nil,
              heldThroughSeq <= loadedThroughSeq else { return [] }
        let token = tokens.next()
        expiring = token
        return [.store(.giveUpExpiredOutbound(session: id, after: loadedThroughSeq, nowMS: now, limit: limits.expiryBatch),
                       tag: token, then: .expiredGivenUp(session: id))]
    }

    /// Gives back every byte the session holds in memory; its queues stay in the store.
    mutating func releaseWindows(budget: inout MemoryBudget) {
        budget.dropWindows(of: &self)
        loadedThroughSeq = serverAckedSeq
        locating = nil
        transmittedCount = 0
    }

    /// DURABLE = 0 keeps nothing for a client that is not there: with no client attached,
    /// the inbox is dropped (marked delivered) as soon as it is stored, stored only so that
    /// the server's ACK and RESUME_AFTER stay right.
    mutating func dropUnattended(flow: Bool, budget: inout MemoryBudget, tokens: inout Tokens) -> [SessionAction] {
        guard !durable, attachedClient == nil, receivedSeq > clientAckedSeq else { return [] }
        let seq = receivedSeq
        budget.dropInboundWindow(of: &self)
        clientAckedSeq = seq
        handedOverSeq = seq
        var actions = [tokens.store(.markDelivered(session: id, upTo: seq), then: .deliveredStored(session: id, seq: seq))]
        if pausedUpstream {
            pausedUpstream = false
            if upstream == .open, flow {
                actions.append(.send(.window(WindowUpdate(session: id, window: Session.defaultWindow))))
            }
        }
        return actions
    }

    /// With FLOW: WINDOW 0 once the messages stored or being stored reach `limit`
    /// (`[limits] inbox_messages`). Counted as DATA arrives, not once it is stored, so a burst
    /// cannot pass the limit while the store catches up; the server stops, and over MQTT the
    /// adapter refuses what the broker sends beyond it. A session that keeps nothing for an
    /// absent client (DURABLE = 0, detached) is never paused: what it stores is dropped at once.
    mutating func pauseIfInboxFull(limit: Int) -> [SessionAction] {
        guard !pausedUpstream, durable || attachedClient != nil, inboxCount + storingIn.count >= limit else { return [] }
        pausedUpstream = true
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
