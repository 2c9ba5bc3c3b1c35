import AgentIPC
import IMLink
import NIOCore

/// Inbound: DATA from the server to the store, ACK upstream, MESSAGE to the client.
extension SessionRouter {
    // MARK: Inbound

    mutating func dataIn(_ data: DataFrame) -> [SessionAction] {
        let flow = link?.flow == true
        return table.modify(data.session) { session in
            guard session.upstream == .open || session.upstream == .opening else {
                return [.send(.error(ErrorFrame(session: data.session, code: .unknownSession, message: "session is not open")))]
            }
            // The counters only: a copy of the whole queue kept alive across `receive` would make it copy its rings.
            let (storingSeq, receivedSeq, ackedUpstreamSeq) = (session.inbound.storingSeq, session.inbound.receivedSeq,
                                                               session.inbound.ackedUpstreamSeq)
            if data.seq <= storingSeq {
                // A duplicate: discard it, but acknowledge again what is stored.
                guard data.seq <= receivedSeq, receivedSeq > 0 else { return [] }
                return [.send(.ack(Ack(session: data.session, seq: receivedSeq)))]
            }
            guard data.seq == storingSeq + 1 else {
                return [.dropLink(reason: "DATA seq \(data.seq) for session \(data.session) after \(storingSeq): a gap")]
            }
            // Whatever the server does, it may not have more than the largest window we ever
            // announce unacknowledged: beyond it, it ignores WINDOW and would grow our memory.
            if flow, data.seq > ackedUpstreamSeq + UInt64(Session.defaultWindow) {
                return [.dropLink(reason: "DATA seq \(data.seq) for session \(data.session) beyond its window "
                    + "(\(Session.defaultWindow) after ACK \(ackedUpstreamSeq)): the server ignores WINDOW")]
            }
            let token = tokens.next()
            session.inbound.receive(data.seq, data.body, token: token, budget: &budget)
            // A large body's CRC, kept from the frame's check, is what the store records for it.
            return [.store(.appendInbound(session: data.session, seq: data.seq, payload: data.body, payloadCRC: data.bodyCRC), tag: token,
                           then: .inboundStored(session: data.session, seq: data.seq))]
                + (flow ? session.pauseIfInboxFull(limit: limits.inboxMessages) : [])
        } ?? [.send(.error(ErrorFrame(session: data.session, code: .unknownSession, message: "session is not open")))]
    }

    mutating func inboundStored(session id: UInt64, seq: UInt64, token: UInt64,
                                _ result: Result<Void, SessionPersistenceError>) -> [SessionAction] {
        guard table[id]?.inbound.storingToken(seq) == token else {
            return [.log(.debug, "session \(id): inbound seq \(seq) completed after it was given up")]
        }
        let flow = link?.flow == true
        var actions = table.modify(id) { session -> [SessionAction] in
            switch result {
            case .failure(let error):
                // Unstored means unacknowledged: the server resends from RESUME_AFTER on the next link.
                session.inbound.storeFailed(from: seq, budget: &budget)
                // Our disk's failure, not the server's: no ERROR upstream, the link backs off and resumes.
                return [.storeFailed(reason: "session \(id): inbound seq \(seq) not stored: \(error)")]
            case .success:
                totals.received += session.inbound.stored(seq, reads: session.attachedClient != nil,
                                                        outboundBytes: session.outbound.memoryBytes, budget: &budget)
                var actions: [SessionAction] = []
                if owed.ack(id) { actions.append(.scheduleAckFlush) }
                actions += session.dropUnattended(flow: flow, budget: &budget, tokens: &tokens)
                if flow { actions += session.pauseIfInboxFull(limit: limits.inboxMessages) }
                return actions
            }
        }!
        if case .success = result { actions += deliver(id) }
        return actions
    }

    /// The next batch of MESSAGEs for the session's client, if it is attached and reading.
    /// Messages leave the window as they are handed over; the next ones are read from the
    /// store (a client that attaches again gets them again from there).
    mutating func deliver(_ id: UInt64) -> [SessionAction] {
        // Looked at through a projection: a copy of the session kept alive across `modify` would make it copy the inbox.
        guard let (attached, behind) = table[id].map({ ($0.attachedClient, $0.inbound.hasUndelivered) }),
              let client = attached, behind, holds.mayDeliver(id, to: client) else { return [] }
        return table.modify(id) { session in
            let (batch, redelivered) = session.inbound.handOver(limit: limits.deliveryBatch, maxBytes: limits.deliveryBatchBytes,
                                                                budget: &budget)
            totals.redelivered += redelivered
            let actions: [SessionAction] = batch.isEmpty ? [] : [.deliver(client: client, session: id, batch)]
            return actions + session.refillInbound(reading: true, budget: &budget, tokens: &tokens, limits: limits)
        }!
    }

    /// Reads what the session's windows have room for (after the budget woke it).
    mutating func refill(_ id: UInt64) -> [SessionAction] {
        let reading = table[id].map { isReading($0) } ?? false
        return table.modify(id) { session in
            session.refillOutbound(budget: &budget, tokens: &tokens, limits: limits)
                + session.refillInbound(reading: reading, budget: &budget, tokens: &tokens, limits: limits)
        } ?? []
    }

    /// Whether the session's client reads MESSAGEs now: attached, its channel writable, and
    /// no attach waiting for SENDs being stored (its OPENED comes first).
    func isReading(_ session: Session) -> Bool {
        guard let client = session.attachedClient else { return false }
        return holds.mayDeliver(session.id, to: client)
    }
}
