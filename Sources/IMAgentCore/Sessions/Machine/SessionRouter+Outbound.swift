import AgentIPC
import AgentStore
import IMLink
import NIOCore

/// Outbound: stored SENDs to DATA on the link, ACKs, OPEN_OK and OPEN_FAIL (TTLs: `SessionRouter+Expiry.swift`).
extension SessionRouter {
    // MARK: Outbound

    mutating func outboundStored(client: UInt64, request: UInt32, session id: UInt64, seq: UInt64, token: UInt64,
                                 _ result: Result<Void, SessionPersistenceError>) -> [SessionAction] {
        func notStored(_ error: SessionPersistenceError) -> SessionAction {
            .fail(client: client, request: request, error == .full ? .queueFull : .internal, "message not stored: \(error)")
        }
        guard let current = table[id].map({ $0.outbound.storingToken(seq) }) else {
            switch result {
            case .success: return [.fail(client: client, request: request, .sessionClosed, "session \(id) was closed")]
            case .failure(let error): return [notStored(error)]
            }
        }
        guard current == token else {
            // An earlier failure already gave this seq up.
            switch result {
            case .success:
                return [.fail(client: client, request: request, .internal, "message \(seq) was stored after an earlier one failed"),
                        .log(.warning, "session \(id): store completed seq \(seq) after a failed append")] + releaseAttaches(id)
            case .failure(let error): return [notStored(error)]
            }
        }
        if case .failure(let error) = result {
            // Later appends of this session fail too (the store's contract): their seqs are given back now.
            table.modify(id) { $0.outbound.storeFailed(from: seq, budget: &budget) }
            return [notStored(error)] + releaseAttaches(id)
        }
        let instant = now.instant
        let earliestDeadline: Int64? = table.modify(id) { session in
            let (accepted, earliest) = session.outbound.stored(seq, acceptedAt: instant, mayKeep: !session.isFailed,
                                                               inboundBytes: session.inbound.memoryBytes,
                                                               budget: &budget)
            totals.accepted += accepted
            return earliest
        }!
        var actions: [SessionAction] = []
        if let earliestDeadline {
            expiry.track(id)
            actions += wakeExpiry(at: earliestDeadline)
        }
        // ACCEPTED in seq order, so a client's SEQs arrive increasing.
        actions.append(.reply(client: client, request: request, .accepted(.init(session: id, seq: seq))))
        return actions + transmit(id) + releaseAttaches(id)
    }

    /// The OPENEDs that waited for the session's SENDs in flight, once none is left.
    mutating func releaseAttaches(_ id: UInt64) -> [SessionAction] {
        // Looked up first: on the message path there is nothing waiting, and no session to copy.
        guard holds.hasAttaches(id),
              let (attached, opened, storing) = table[id].map({ ($0.attachedClient, $0.opened, $0.outbound.isStoring) }),
              !storing else { return [] }
        var actions: [SessionAction] = []
        for waiter in holds.takeAttaches(id) where attached == waiter.client {
            actions.append(.reply(client: waiter.client, request: waiter.request, .opened(opened)))
        }
        return actions + deliver(id)
    }

    /// DATA for what the window allows, after the entries already on this link.
    /// A message whose TTL passed, or too large for the server, is given up
    /// here instead: it was never on this link, and OPEN_OK said the server lacks it.
    mutating func transmit(_ id: UInt64) -> [SessionAction] {
        guard let link, table[id]?.upstream == .open else { return [] }
        let instant = now.instant
        let now = now.wallMS
        return table.modify(id) { session in
            var actions: [SessionAction] = []
            session.outbound.transmit(maxFrame: link.maxFrame, now: now, at: instant, linkWrites: &totals.dataWritten, budget: &budget) { done in
                switch done {
                case .data(let wireSeq, let payload, let payloadCRC, let resent):
                    if resent { totals.resent += 1 }
                    actions.append(.send(.data(DataFrame(session: id, seq: wireSeq, body: payload, bodyCRC: payloadCRC))))
                case .expired(let seq):
                    actions.append(tokens.store(.giveUpOutbound(session: id, seq: seq),
                                                then: .givenUp(session: id, seq: seq, code: .expired, reason: Self.expiredReason)))
                case .tooLarge(let seq, let bytes):
                    let reason = "\(bytes) bytes exceed the server's MAX_FRAME of \(link.maxFrame) bytes"
                    actions.append(tokens.store(.giveUpOutbound(session: id, seq: seq),
                                                then: .givenUp(session: id, seq: seq, code: .payloadTooLarge, reason: reason)))
                }
            }
            return actions + session.refillOutbound(budget: &budget, tokens: &tokens, limits: limits)
        }!
    }

    /// The server holds everything up to wire seq `wireSeq`: drop it, record
    /// it (as the IPC seq of the last message it covers), and tell the client once stored.
    /// What it covers after the window (only an OPEN_OK after a restart) comes as `span`.
    mutating func advanceAcked(_ id: UInt64, toWire wireSeq: UInt64, beyondWindow span: OutboundSpan? = nil) -> [SessionAction] {
        guard let current = table[id]?.outbound.wireAckedSeq, wireSeq > current else { return [] }
        let instant = now.instant
        return table.modify(id) { session in
            var actions: [SessionAction] = []
            guard let seq = session.outbound.acknowledge(throughWire: wireSeq, beyondWindow: span, budget: &budget, {
                actions.append(.acknowledged(after: instant - $0))
            }) else { return actions }
            session.poison.acknowledged(through: seq)
            return actions + [tokens.store(.markAcked(session: id, upTo: seq), then: .ackedStored(session: id, seq: seq))]
        }!
    }

    mutating func openOK(_ ok: OpenOK) -> [SessionAction] {
        guard let (upstream, locating, wireAckedSeq, outboxStored, windowCount) = table[ok.session].map({
                  ($0.upstream, $0.outbound.locating != nil, $0.outbound.wireAckedSeq, $0.outbound.storedCount, $0.outbound.window.count) }),
              upstream == .opening, !locating else {
            return [.log(.debug, "OPEN_OK for session \(ok.session), which is not being opened")]
        }
        var actions: [SessionAction] = []
        // LAST_ACKED is a wire seq (see `Session`).
        var lastAcked = ok.lastAcked
        let highest = wireAckedSeq + UInt64(outboxStored)
        if lastAcked > highest {
            actions.append(.log(.warning, "session \(ok.session): server claims wire seq \(lastAcked) but only \(highest) were sent"))
            lastAcked = highest
        }
        if lastAcked < wireAckedSeq {
            if link?.serverKeepsAcknowledged == false {
                actions.append(.log(.debug, "session \(ok.session): the broker keeps no count of acknowledged seqs; "
                                    + "\(wireAckedSeq) were acknowledged before, the rest is sent again"))
            } else {
                actions.append(.log(.warning, "session \(ok.session): server lost wire seqs \(lastAcked + 1)…\(wireAckedSeq), which it had acknowledged"))
            }
        }
        let covered = lastAcked > wireAckedSeq ? Int(lastAcked - wireAckedSeq) : 0
        guard covered > windowCount else {
            return actions + completeOpenOK(ok.session, lastAcked: lastAcked, window: ok.window, beyondWindow: nil)
        }
        // After a restart nothing is read back yet: the store says which seqs (gaps of
        // messages given up included) and how many bytes the acknowledged messages are.
        return actions + table.modify(ok.session) { pending in
            let token = tokens.next()
            let span = pending.outbound.locate(covered, lastAcked: lastAcked, window: ok.window, token: token, budget: &budget)
            return [.store(.outboundSpan(session: ok.session, after: span.after, count: span.count),
                           tag: token, then: .located(session: ok.session))]
        }!
    }

    /// The session is open upstream: what the server holds is acknowledged, the rest is sent.
    mutating func completeOpenOK(_ id: UInt64, lastAcked: UInt64, window: UInt32?, beyondWindow span: OutboundSpan?) -> [SessionAction] {
        var actions: [SessionAction] = []
        let flow = link?.flow == true
        table.modify(id) { session in
            session.upstream = .open
            session.outbound.opened(sendWindow: flow ? (window ?? Session.defaultWindow) : nil)
        }
        actions += advanceAcked(id, toWire: lastAcked, beyondWindow: span)
        // The server lacks everything after LAST_ACKED: from now on their TTLs count.
        table.modify(id) { $0.outbound.serverHoldsOnlyAcknowledged() }
        if expiry.tracks(id) {
            let (expired, next) = expire(id, now: now.wallMS)
            actions += expired + wakeExpiry(at: next)
        }
        if let (client, change) = table[id].map({ ($0.attachedClient, SessionChange(.state, $0)) }) {
            if let client {
                actions.append(.event(client: client, .sessionState(.init(session: id, state: change.state))))
            }
            actions.append(.watch(change))
        }
        actions += transmit(id)
        return actions
    }

    mutating func openFail(_ fail: OpenFail) -> [SessionAction] {
        guard let client = table[fail.session].map({ $0.attachedClient }) else {
            return [.log(.debug, "OPEN_FAIL for session \(fail.session), which is not open here")]
        }
        let text = fail.message ?? "\(fail.code)"
        var actions: [SessionAction] = []
        if fail.code == .sessionClosed {
            if let client {
                actions.append(.event(client: client, .sessionState(.init(session: fail.session, state: .closed, code: .sessionClosed, message: text))))
            }
            actions += closeLocally(fail.session, tellUpstream: false, reason: "the server closed the session: \(text)",
                                    then: .closed(client: nil, request: 0, session: fail.session))
            return actions
        }
        // FORBIDDEN or anything else: this session only fails; the link and the others go on.
        totals.refused += 1
        return [.log(.warning, "server refused session \(fail.session) (\(fail.code)): \(text)")]
            + failSession(fail.session, code: fail.code.rawValue, reason: "the server refused the session (\(fail.code)): \(text)")
    }

    /// The session fails: nothing more of it goes upstream, on this link or a later one, and its
    /// owner reads `reason` (SESSION_STATE now, SEND's error and SESSIONS later) until it closes
    /// the session. The link and the other sessions go on.
    mutating func failSession(_ id: UInt64, code: UInt16?, reason: String) -> [SessionAction] {
        guard let (client, change) = table.modify(id, { session -> (UInt64?, SessionChange) in
            session.upstream = .failed(code: code, message: reason)
            session.releaseWindows(budget: &budget)
            budget.stopWaiting(id)
            return (session.attachedClient, SessionChange(.state, session, reason: reason))
        }) else { return [] }
        var actions: [SessionAction] = []
        if let client {
            actions.append(.event(client: client, .sessionState(.init(session: id, state: .failed, code: .upstreamRejected, message: reason))))
        }
        actions.append(.watch(change))
        return actions
    }

    mutating func ackIn(_ ack: Ack) -> [SessionAction] {
        // Only the counters: a copy of the session held across `advanceAcked` would make it copy the outbox.
        guard let (wireAckedSeq, lastSent) = table[ack.session].map({ ($0.outbound.wireAckedSeq, $0.outbound.lastTransmittedWireSeq) }) else {
            return [.log(.debug, "ACK for session \(ack.session), which is not open here")]
        }
        // ACK carries a wire seq (see `Session`).
        guard ack.seq > wireAckedSeq else { return [] }
        guard ack.seq <= lastSent else {
            return [.dropLink(reason: "ACK \(ack.seq) for session \(ack.session) beyond the last DATA sent (\(lastSent))")]
        }
        return advanceAcked(ack.session, toWire: ack.seq) + transmit(ack.session)
    }

    mutating func windowIn(_ update: WindowUpdate) -> [SessionAction] {
        guard link?.flow == true else {
            return [.dropLink(reason: "WINDOW for session \(update.session) without FLOW negotiated")]
        }
        guard table[update.session]?.upstream == .open else {
            return [.log(.debug, "WINDOW for session \(update.session), which is not open here")]
        }
        table.modify(update.session) { $0.outbound.serverAllows(update.window) }
        return transmit(update.session)
    }
}
