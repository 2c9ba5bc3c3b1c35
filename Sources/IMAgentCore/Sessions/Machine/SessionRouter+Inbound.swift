import AgentIPC
import IMLink
import NIOCore

/// Inbound: DATA from the server to the store, ACK upstream, MESSAGE to the client.
extension SessionRouter {
    // MARK: Inbound

    mutating func dataIn(_ data: DataFrame) -> [SessionAction] {
        // Taken, not copied to be looked at (see `outboundStored`).
        guard var session = sessions.removeValue(forKey: data.session) else {
            return [.send(.error(ErrorFrame(session: data.session, code: .unknownSession, message: "session is not open")))]
        }
        defer { sessions[data.session] = session }
        guard session.upstream == .open || session.upstream == .opening else {
            return [.send(.error(ErrorFrame(session: data.session, code: .unknownSession, message: "session is not open")))]
        }
        if data.seq <= session.storingSeq {
            // A duplicate: discard it, but acknowledge again what is stored.
            guard data.seq <= session.receivedSeq, session.receivedSeq > 0 else { return [] }
            return [.send(.ack(Ack(session: data.session, seq: session.receivedSeq)))]
        }
        guard data.seq == session.storingSeq + 1 else {
            return [.dropLink(reason: "DATA seq \(data.seq) for session \(data.session) after \(session.storingSeq): a gap")]
        }
        // Whatever the server does, it may not have more than the largest window we ever
        // announce unacknowledged: beyond it, it ignores WINDOW and would grow our memory.
        if link?.flow == true, data.seq > session.ackedUpstreamSeq + UInt64(Session.defaultWindow) {
            return [.dropLink(reason: "DATA seq \(data.seq) for session \(data.session) beyond its window "
                + "(\(Session.defaultWindow) after ACK \(session.ackedUpstreamSeq)): the server ignores WINDOW")]
        }
        session.storingSeq = data.seq
        let token = takeToken()
        session.storingIn.append(data.seq, .init(payload: data.body, token: token))
        budget.beginStoringIn(data.body.readableBytes, in: &session)
        return [.persist(.appendInbound(session: data.session, seq: data.seq, payload: data.body),
                         then: .inboundStored(session: data.session, seq: data.seq, token: token))]
    }

    mutating func inboundStored(session id: UInt64, seq: UInt64, token: UInt64,
                                        _ result: Result<Void, SessionPersistenceError>) -> [SessionAction] {
        func givenUp() -> [SessionAction] { [.log(.debug, "session \(id): inbound seq \(seq) completed after it was given up")] }
        guard var session = sessions.removeValue(forKey: id) else { return givenUp() }
        guard let entry = session.storingIn[seq], entry.token == token else {
            sessions[id] = session
            return givenUp()
        }
        switch result {
        case .failure(let error):
            // Unstored means unacknowledged: the server resends from RESUME_AFTER on the next link.
            let bytes = session.storingIn.removeFrom(seq).reduce(0) { $0 + $1.payload.readableBytes }
            budget.endStoringIn(bytes, in: &session)
            session.storingSeq = seq - 1
            sessions[id] = session
            // Our disk's failure, not the server's: no ERROR upstream, the link backs off and resumes.
            return [.storeFailed(reason: "session \(id): inbound seq \(seq) not stored: \(error)")]
        case .success:
            session.storingIn.markStored(seq)
            while let next = session.storingIn.popStored() {
                session.receivedSeq += 1
                receivedTotal += 1
                // Kept in the window for a reading client when it follows the window and
                // fits; otherwise read back from the store when the client gets to it.
                budget.endStoringIn(next.payload.readableBytes, in: &session)
                // A blocked client counts as reading: it drains soon, and the window bounds what waits.
                if session.attachedClient != nil, session.inboundLoad == nil,
                   session.dispatchedSeq + UInt64(session.inbox.count) + 1 == session.receivedSeq,
                   budget.fits(Session.windowCost(next.payload), session) {
                    session.inbox.append((session.receivedSeq, next.payload))
                    budget.keepInbound(Session.windowCost(next.payload), in: &session)
                }
            }
            var actions: [SessionAction] = []
            acksDue.insert(id)
            if !ackFlushScheduled {
                ackFlushScheduled = true
                actions.append(.scheduleAckFlush)
            }
            actions += dropUnattended(&session)
            if !session.pausedUpstream, link?.flow == true, session.inboxCount >= limits.inboxMessages {
                session.pausedUpstream = true
                if session.upstream == .open {
                    actions.append(.send(.window(WindowUpdate(session: id, window: 0))))
                }
                if let client = session.attachedClient {
                    actions.append(.event(client: client, .sessionState(.init(session: id, state: session.state))))
                }
                actions.append(.watch(SessionChange(.state, session, reason: "the inbox is full")))
            }
            sessions[id] = session
            actions += deliver(id)
            return actions
        }
    }

    /// DURABLE = 0 keeps nothing for a client that is not there: with no
    /// client attached, the inbox is dropped (marked delivered) as soon as it
    /// is stored — stored only so that the server's ACK and RESUME_AFTER stay right.
    mutating func dropUnattended(_ session: inout Session) -> [SessionAction] {
        guard !session.durable, session.attachedClient == nil, session.receivedSeq > session.deliveredSeq else { return [] }
        let seq = session.receivedSeq
        resetInboundWindow(&session)
        session.deliveredSeq = seq
        session.dispatchedSeq = seq
        var actions: [SessionAction] = [.persist(.markDelivered(session: session.id, seq: seq),
                                                 then: .deliveredStored(session: session.id, seq: seq))]
        if session.pausedUpstream {
            session.pausedUpstream = false
            if session.upstream == .open, link?.flow == true {
                actions.append(.send(.window(WindowUpdate(session: session.id, window: Session.defaultWindow))))
            }
        }
        return actions
    }

    /// `dropUnattended` for a session in the table.
    mutating func dropUnattended(_ id: UInt64) -> [SessionAction] {
        guard sessions[id] != nil else { return [] }
        var session = take(id)
        let actions = dropUnattended(&session)
        sessions[id] = session
        return actions
    }

    /// The next batch of MESSAGEs for the session's client, if it is attached and reading.
    /// Messages leave the window as they are handed over; the next ones are read from the
    /// store (a client that attaches again gets them again from there).
    mutating func deliver(_ id: UInt64) -> [SessionAction] {
        guard let (attached, behind) = sessions[id].map({ ($0.attachedClient, $0.dispatchedSeq < $0.receivedSeq) }),
              let client = attached, behind, !blockedClients.contains(client), attachesAwaitingStores[id] == nil else { return [] }
        var taken = take(id)
        var batch: [(seq: UInt64, payload: ByteBuffer)] = []
        var bytes = 0
        var cost = 0
        while batch.count < limits.deliveryBatch, let first = taken.inbox.first,
              batch.isEmpty || bytes + first.payload.readableBytes <= limits.deliveryBatchBytes {
            taken.inbox.removeFirst()
            batch.append(first)
            bytes += first.payload.readableBytes
            cost += Session.windowCost(first.payload)
        }
        redeliveredTotal += taken.dispatch(batch.count)
        budget.releaseInbound(cost, from: &taken)
        var actions: [SessionAction] = batch.isEmpty ? [] : [.deliver(client: client, session: id, batch)]
        actions += refillInbound(&taken)
        sessions[id] = taken
        return actions
    }
}
