import AgentIPC
import AgentStore
import IMLink
import NIOCore

/// Outbound: stored SENDs to DATA on the link, ACKs, TTLs, OPEN_OK and OPEN_FAIL.
extension SessionRouter {
    // MARK: Outbound

    mutating func outboundStored(client: UInt64, request: UInt32, session id: UInt64, seq: UInt64, token: UInt64,
                                 _ result: Result<Void, SessionPersistenceError>) -> [SessionAction] {
        func notStored(_ error: SessionPersistenceError) -> SessionAction {
            .fail(client: client, request: request, error == .full ? .queueFull : .internal, "message not stored: \(error)")
        }
        guard let current = table[id].map({ $0.storingOut[seq]?.token }) else {
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
            table.modify(id) { session in
                // Later appends of this session fail too (the store's contract): give their seqs back now.
                for entry in session.storingOut.removeFrom(seq) {
                    budget.endStoringOut(entry.payload.readableBytes, client: entry.client, in: &session)
                }
                session.assignedSeq = seq - 1
            }
            return [notStored(error)] + releaseAttaches(id)
        }
        var actions: [SessionAction] = table.modify(id) { session in
            session.storingOut.markStored(seq)
            var actions: [SessionAction] = []
            // ACCEPTED in seq order, so a client's SEQs arrive increasing.
            while let next = session.storingOut.popStored() {
                session.acceptedSeq += 1
                acceptedTotal += 1
                let bytes = next.payload.readableBytes
                budget.endStoringOut(bytes, client: next.client, in: &session)
                session.outboxBytes += bytes
                // The window keeps it when everything before it is in memory too, nothing reads or
                // gives up after the window, and there is room; otherwise it is read back from the
                // store when its turn comes.
                let cost = Session.windowCost(next.payload)
                let keep = session.outboxWindow.count == session.outboxStored && session.outboundLoad == nil
                    && session.expiring == nil && session.locating == nil && !session.isFailed && budget.fits(cost, session)
                session.outboxStored += 1
                if keep {
                    session.outboxWindow.append(.init(seq: session.acceptedSeq, payload: next.payload, deadlineMS: next.deadlineMS,
                                                     acceptedAt: now.instant))
                    session.loadedThroughSeq = session.acceptedSeq
                    budget.keepOutbound(cost, in: &session)
                } else if let deadline = next.deadlineMS {
                    session.storeDeadlineMS = min(session.storeDeadlineMS ?? deadline, deadline)
                }
                if let deadline = next.deadlineMS {
                    sessionsWithTTL.insert(id)
                    actions.append(.expireAt(deadline))
                }
            }
            return actions
        }!
        actions.append(.reply(client: client, request: request, .accepted(.init(session: id, seq: seq))))
        return actions + transmit(id) + releaseAttaches(id)
    }

    /// The OPENEDs that waited for the session's SENDs in flight, once none is left.
    mutating func releaseAttaches(_ id: UInt64) -> [SessionAction] {
        // Looked up first: on the message path there is nothing waiting, and no session to copy.
        guard attachesAwaitingStores[id] != nil,
              let (attached, opened, storing) = table[id].map({ ($0.attachedClient, $0.opened, $0.assignedSeq > $0.acceptedSeq) }),
              !storing, let waiting = attachesAwaitingStores.removeValue(forKey: id) else { return [] }
        var actions: [SessionAction] = []
        for waiter in waiting where attached == waiter.client {
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
            while session.transmittedCount < session.outboxWindow.count {
                if let window = session.sendWindow, session.transmittedCount >= Int(window) { break }
                // The ACKs of what is ahead on the link call this again.
                if session.transmittedCount > 0, session.transmittedBytes >= Session.linkAheadBytes { break }
                let index = session.outboxWindow.index(session.outboxWindow.startIndex, offsetBy: session.transmittedCount)
                let message = session.outboxWindow[index]
                if message.seq > session.heldThroughSeq, let deadline = message.deadlineMS, deadline <= now {
                    actions += session.giveUp(at: session.transmittedCount, code: .expired,
                                              reason: "its TTL passed before it reached the server", budget: &budget, tokens: &tokens)
                    continue
                }
                if message.bytes > Int(link.maxFrame) {
                    actions += session.giveUp(at: session.transmittedCount, code: .payloadTooLarge,
                                              reason: "\(message.bytes) bytes exceed the server's MAX_FRAME of \(link.maxFrame) bytes",
                                              budget: &budget, tokens: &tokens)
                    continue
                }
                session.heldThroughSeq = max(session.heldThroughSeq, message.seq)
                if message.seq <= session.transmittedThroughSeq { resentTotal += 1 } else { session.transmittedThroughSeq = message.seq }
                linkWrites += 1
                session.outboxWindow[index].writtenAt = instant
                session.outboxWindow[index].writeOrder = linkWrites
                session.transmittedCount += 1
                session.transmittedBytes += message.bytes
                let wireSeq = session.wireAckedSeq + UInt64(session.transmittedCount)
                actions.append(.send(.data(DataFrame(session: id, seq: wireSeq, body: message.payload))))
            }
            return actions + session.refillOutbound(budget: &budget, tokens: &tokens, limits: limits)
        }!
    }

    /// Gives up the session's messages whose TTL passed and that the server
    /// is known not to have; returns the next deadline still ahead, if any.
    /// The window is looked at here; after it, the store finds them (`expireStored`).
    mutating func expire(_ id: UInt64, now: Int64) -> (actions: [SessionAction], next: Int64?) {
        guard let locating = table[id].map({ $0.locating != nil }) else {
            sessionsWithTTL.remove(id)
            return ([], nil)
        }
        // An OPEN_OK waiting for the store: the window must stay as LAST_ACKED found it.
        if locating { return ([], nil) }
        return table.modify(id) { session in
            var actions: [SessionAction] = []
            var next: Int64?
            var waiting = false
            var offset = session.transmittedCount  // those before are on the current link: the server decides them
            while offset < session.outboxWindow.count {
                let entry = session.outboxWindow[session.outboxWindow.index(session.outboxWindow.startIndex, offsetBy: offset)]
                if let deadline = entry.deadlineMS {
                    if entry.seq > session.heldThroughSeq, deadline <= now {
                        actions += session.giveUp(at: offset, code: .expired, reason: "its TTL passed before it reached the server",
                                                  budget: &budget, tokens: &tokens)
                        continue
                    }
                    waiting = true
                    if entry.seq > session.heldThroughSeq { next = min(next ?? deadline, deadline) }
                }
                offset += 1
            }
            actions += session.expireStored(now: now, tokens: &tokens, limits: limits)
            if let deadline = session.storeDeadlineMS {
                waiting = true
                if deadline > now { next = min(next ?? deadline, deadline) }
            }
            if !waiting, session.expiring == nil,
               !session.outboxWindow.prefix(session.transmittedCount).contains(where: { $0.deadlineMS != nil }) {
                sessionsWithTTL.remove(id)
            }
            return (actions, next)
        }!
    }

    /// The TTL timer fired: give up what is due, everywhere.
    mutating func expireAllDue() -> [SessionAction] {
        let now = now.wallMS
        var actions: [SessionAction] = []
        var next: Int64?
        for id in sessionsWithTTL.sorted() {
            let (expired, due) = expire(id, now: now)
            actions += expired
            if let due { next = min(next ?? due, due) }
        }
        if let next { actions.append(.expireAt(next)) }
        return actions
    }

    /// The server holds everything up to wire seq `wireSeq`: drop it, record
    /// it (as the IPC seq of the last message it covers), and tell the client once stored.
    /// What it covers after the window (only an OPEN_OK after a restart) comes as `span`.
    mutating func advanceAcked(_ id: UInt64, toWire wireSeq: UInt64, beyondWindow span: OutboundSpan? = nil) -> [SessionAction] {
        guard let current = table[id]?.wireAckedSeq, wireSeq > current else { return [] }
        return table.modify(id) { session in
            let count = Int(min(wireSeq - session.wireAckedSeq, UInt64(session.outboxWindow.count)))
            var actions: [SessionAction] = []
            var seq = session.serverAckedSeq
            var bytes = 0
            var cost = 0
            for _ in 0..<count {
                let entry = session.outboxWindow.removeFirst()
                if let accepted = entry.acceptedAt { actions.append(.acknowledged(after: now.instant - accepted)) }
                seq = entry.seq
                bytes += entry.bytes
                cost += Session.windowCost(entry.payload)
            }
            budget.releaseOutbound(cost, from: &session)
            let bytesInWindow = bytes
            var covered = count
            if let span, span.count > 0 {
                seq = span.lastSeq
                bytes += span.bytes
                covered += span.count
            }
            guard covered > 0 else { return actions }
            session.outboxStored -= covered
            session.outboxBytes -= bytes
            session.serverAckedSeq = seq
            session.poison.acknowledged(through: seq)
            session.loadedThroughSeq = max(session.loadedThroughSeq, seq)
            session.wireAckedSeq += UInt64(covered)
            session.transmittedBytes = max(0, session.transmittedBytes - bytesInWindow)
            session.transmittedCount = max(0, session.transmittedCount - count)
            return actions + [tokens.store(.markAcked(session: id, upTo: seq), then: .ackedStored(session: id, seq: seq))]
        }!
    }

    mutating func openOK(_ ok: OpenOK) -> [SessionAction] {
        guard let (upstream, locating, wireAckedSeq, outboxStored, windowCount) = table[ok.session].map({
                  ($0.upstream, $0.locating != nil, $0.wireAckedSeq, $0.outboxStored, $0.outboxWindow.count) }),
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
            budget.endRead(\.outboundLoad, in: &pending)
            let token = tokens.next()
            pending.locating = Session.PendingOpenOK(token: token, lastAcked: lastAcked, window: ok.window)
            return [.store(.outboundSpan(session: ok.session, after: pending.loadedThroughSeq, count: covered - pending.outboxWindow.count),
                           tag: token, then: .located(session: ok.session))]
        }!
    }

    /// The session is open upstream: what the server holds is acknowledged, the rest is sent.
    mutating func completeOpenOK(_ id: UInt64, lastAcked: UInt64, window: UInt32?, beyondWindow span: OutboundSpan?) -> [SessionAction] {
        var actions: [SessionAction] = []
        let flow = link?.flow == true
        table.modify(id) { session in
            session.upstream = .open
            session.transmittedCount = 0
            session.sendWindow = flow ? (window ?? Session.defaultWindow) : nil
        }
        actions += advanceAcked(id, toWire: lastAcked, beyondWindow: span)
        // The server lacks everything after LAST_ACKED: from now on their TTLs count.
        table.modify(id) { $0.heldThroughSeq = $0.serverAckedSeq }
        if sessionsWithTTL.contains(id) {
            let (expired, next) = expire(id, now: now.wallMS)
            actions += expired
            if let next { actions.append(.expireAt(next)) }
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
        refusedTotal += 1
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
        guard let (wireAckedSeq, transmittedCount) = table[ack.session].map({ ($0.wireAckedSeq, $0.transmittedCount) }) else {
            return [.log(.debug, "ACK for session \(ack.session), which is not open here")]
        }
        // ACK carries a wire seq (see `Session`).
        guard ack.seq > wireAckedSeq else { return [] }
        let lastSent = wireAckedSeq + UInt64(transmittedCount)
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
        table.modify(update.session) { $0.sendWindow = update.window }
        return transmit(update.session)
    }
}
