import AgentIPC
import IMLink
import NIOCore

/// Requests of local clients (OPEN, DETACH, CLOSE, SEND, ACK) and their connections' state.
extension SessionRouter {
    // MARK: Client requests

    mutating func openSession(_ client: SessionClient, request: UInt32, _ open: IPCMessage.Open) -> [SessionAction] {
        var actions: [SessionAction] = []
        if open.createsSession {
            guard let service = open.service, !service.isEmpty else {
                return [.fail(client: client.id, request: request, .badRequest, "OPEN of a new session needs SERVICE")]
            }
            // An invalid value, like a missing SERVICE: the frame was well formed, so the connection goes on.
            if let refusal = ServiceName.refusal(service) {
                return [.fail(client: client.id, request: request, .badRequest, refusal)]
            }
            guard table.count + table.creating.count < limits.maxSessions else {
                return [.fail(client: client.id, request: request, .limitReached,
                              "imagentd already holds \(limits.maxSessions) sessions ([limits] max_sessions)")]
            }
            if let refusal = perUIDSessionRefusal(client.uid) {
                return [.fail(client: client.id, request: request, .limitReached, refusal)]
            }
            var session = Session(id: table.newID(&random), service: service, owner: client.uid, priority: open.priority ?? .normal,
                                  durable: open.durable ?? true)
            session.attachedClient = client.id
            table.beginCreating(session)
            actions.append(tokens.store(session.createOperation(nowMS: now.wallMS),
                                        then: .created(client: client.id, request: request, session: session.id)))
            return actions
        }
        let id = open.session ?? 0
        if let refusal = table.refusal(client, id) {
            return [.fail(client: client.id, request: request, refusal.code, refusal.text)]
        }
        if let other = table[id]?.attachedClient, other != client.id {
            return [.fail(client: client.id, request: request, .sessionBusy, "session \(id) is attached to another client")]
        }
        let (change, opened) = table.modify(id) { session in
            if let priority = open.priority { session.priority = priority }
            session.attachedClient = client.id
            session.inbound.attach(budget: &budget)
            // SENDs (of a client that went away, usually) are being stored: OPENED follows them.
            return (SessionChange(.attached, session), session.outbound.isStoring ? nil : session.opened)
        }!
        actions.append(.watch(change))
        guard let opened else {
            holds.awaitStores(id, (client.id, request))
            return actions
        }
        actions.append(.reply(client: client.id, request: request, .opened(opened)))
        return actions + deliver(id)
    }

    mutating func detachSession(_ client: SessionClient, request: UInt32, session id: UInt64) -> [SessionAction] {
        if let refusal = table.refusal(client, id) {
            return [.fail(client: client.id, request: request, refusal.code, refusal.text)]
        }
        guard table[id]?.attachedClient == client.id else {
            return [.fail(client: client.id, request: request, .sessionBusy, "session \(id) is not attached to this client")]
        }
        return table.modify(id) { session in
            session.attachedClient = nil
            session.inbound.dropWindow(budget: &budget)
            return [.reply(client: client.id, request: request, .ok(.init())),
                    .watch(SessionChange(.detached, session, reason: "DETACH"))]
                + session.dropUnattended(flow: link?.flow == true, budget: &budget, tokens: &tokens)
        }!
    }

    mutating func closeSession(_ client: SessionClient, request: UInt32, session id: UInt64) -> [SessionAction] {
        switch table.authorize(client, id) {
        case .failure(let refusal):
            return [.fail(client: client.id, request: request, refusal.code, refusal.text)]
        case .success(let session):
            var actions: [SessionAction] = []
            if let other = session.attachedClient, other != client.id {
                actions.append(.event(client: other, .sessionState(.init(session: id, state: .closed, message: "closed by another client"))))
            }
            actions += closeLocally(id, tellUpstream: true, reason: "closed by a client",
                                    then: .closed(client: client.id, request: request, session: id))
            return actions
        }
    }

    mutating func queueSend(_ client: SessionClient, request: UInt32, _ send: IPCMessage.Send) -> [SessionAction] {
        if let refusal = table.refusal(client, send.session) {
            return [.fail(client: client.id, request: request, refusal.code, refusal.text)]
        }
        // The owner's, which is the client's uid unless an admin sends on another's session.
        let ownerBytes = table[send.session].map { table.outboxBytesByUID[$0.owner] ?? 0 } ?? 0
        return table.modify(send.session) { session in
            if let other = session.attachedClient, other != client.id {
                return [.fail(client: client.id, request: request, .sessionBusy, "session \(send.session) is attached to another client")]
            }
            if case .failed(_, let message) = session.upstream {
                return [.fail(client: client.id, request: request, .upstreamRejected, message)]
            }
            guard send.payload.readableBytes <= limits.maxPayloadBytes else {
                return [.fail(client: client.id, request: request, .payloadTooLarge,
                              "\(send.payload.readableBytes) bytes exceed [limits] max_payload_bytes = \(limits.maxPayloadBytes)")]
            }
            guard session.outboxCount < limits.outboxMessages else {
                return [.fail(client: client.id, request: request, .queueFull,
                              "session \(send.session) has \(session.outboxCount) messages waiting ([limits] outbox_messages)")]
            }
            let bytes = send.payload.readableBytes
            guard session.outboxTotalBytes + bytes <= limits.outboxBytes else {
                return [.fail(client: client.id, request: request, .queueFull,
                              "session \(send.session) has \(session.outboxTotalBytes) bytes waiting; \(bytes) more would pass "
                                  + "[limits] outbox_bytes = \(limits.outboxBytes)")]
            }
            guard ownerBytes + bytes <= limits.uidOutboxBytes else {
                return [.fail(client: client.id, request: request, .queueFull,
                              "uid \(session.owner) has \(ownerBytes) bytes waiting in its sessions; \(bytes) more would pass "
                                  + "[limits] uid_outbox_bytes = \(limits.uidOutboxBytes)")]
            }
            let token = tokens.next()
            // TTL_MS 0 or absent: forever.
            let deadline = send.ttlMS.flatMap { $0 == 0 ? nil : now.wallMS + Int64($0) }
            // A large payload's CRC, computed once here, serves the store's record of it and its DATA frame.
            let crc = bytes >= DataFrame.bodyCRCKeptFrom ? CRC32C.checksum(send.payload) : nil
            let seq = session.outbound.assign(send.payload, payloadCRC: crc, client: client.id, uid: client.uid, token: token,
                                              deadlineMS: deadline, budget: &budget)
            return [.store(.appendOutbound(session: send.session, seq: seq, payload: send.payload, expiresAtMS: deadline,
                                           payloadCRC: crc),
                           tag: token, then: .accepted(client: client.id, request: request, session: send.session, seq: seq))]
        }!
    }

    mutating func acknowledgeDelivered(_ client: SessionClient, request: UInt32, session id: UInt64, seq: UInt64) -> [SessionAction] {
        if let refusal = table.refusal(client, id) {
            return [.fail(client: client.id, request: request, refusal.code, refusal.text)]
        }
        return table.modify(id) { session in
            if let other = session.attachedClient, other != client.id {
                return [.fail(client: client.id, request: request, .sessionBusy, "session \(id) is attached to another client")]
            }
            guard seq <= session.inbound.receivedSeq else {
                return [.fail(client: client.id, request: request, .badRequest,
                              "ACK \(seq) is beyond the last message of session \(id) (\(session.inbound.receivedSeq))")]
            }
            var actions: [SessionAction] = [.reply(client: client.id, request: request, .ok(.init()))]
            guard seq > session.inbound.clientAckedSeq else { return actions }
            session.inbound.clientAcknowledged(seq, budget: &budget)
            actions.append(tokens.store(.markDelivered(session: id, upTo: seq), then: .deliveredStored(session: id, seq: seq)))
            // Hysteresis: reopen at half the limit, so a reader at the edge does not flap the window.
            if session.inbound.count < limits.inboxMessages / 2, session.inbound.resume() {
                if session.upstream == .open, link?.flow == true {
                    actions.append(.send(.window(WindowUpdate(session: id, window: Session.defaultWindow))))
                }
                actions.append(.event(client: client.id, .sessionState(.init(session: id, state: session.state))))
                actions.append(.watch(SessionChange(.state, session, reason: "the client caught up")))
            }
            return actions
        }!
    }

    /// A client's connection is gone: its sessions live on, detached.
    mutating func disconnectClient(_ clientID: UInt64) -> [SessionAction] {
        holds.forget(client: clientID)
        budget.forgetClient(clientID)
        var actions: [SessionAction] = []
        for id in table.byPriority(table.byClient[clientID] ?? []) {
            actions += table.modify(id) { session in
                session.attachedClient = nil
                session.inbound.dropWindow(budget: &budget)
                return [.watch(SessionChange(.detached, session, reason: "client disconnected"))]
                    + session.dropUnattended(flow: link?.flow == true, budget: &budget, tokens: &tokens)
            } ?? []
        }
        table.forgetCreatingClient(clientID)
        return actions
    }

    /// Whether a client's channel accepts more: blocked clients get no
    /// MESSAGE; a writable one gets the next batch of each of its sessions.
    mutating func setWritable(_ clientID: UInt64, writable: Bool) -> [SessionAction] {
        holds.setWritable(clientID, writable)
        guard writable else { return [] }
        var actions: [SessionAction] = []
        for id in table.byPriority(table.byClient[clientID] ?? []) {
            actions += deliver(id)
        }
        return actions
    }

    /// A batch of the session was just written to its client: the next one while the
    /// client's channel stays writable. Only this session: the client's others continue
    /// on their own batches, or all together when a blocked channel drains.
    mutating func deliverNextBatch(session id: UInt64, client clientID: UInt64, writable: Bool) -> [SessionAction] {
        guard writable else {
            holds.setWritable(clientID, false)
            return []
        }
        return deliver(id)
    }
}
