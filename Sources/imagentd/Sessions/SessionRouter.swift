import AgentIPC
import IMLink
import NIOCore

/// The limits the router enforces (`[limits]` of the configuration).
struct SessionLimits: Hashable, Sendable {
    var maxSessions = 10_000
    /// Open sessions one uid may hold (root: only `maxSessions`).
    var maxSessionsPerUID = 1_000
    var maxPayloadBytes = 1 << 20
    /// Outbound messages per session not yet acknowledged by the server.
    var outboxMessages = 10_000
    /// Inbound messages per session not yet acknowledged by a client; at this
    /// depth the session is paused upstream (WINDOW 0).
    var inboxMessages = 10_000
    /// Outbound payload bytes per session not yet acknowledged by the server.
    var outboxBytes = 1 << 30
    /// Outbound payload bytes of all the sessions of one uid.
    var uidOutboxBytes = 4 << 30
    /// MESSAGE frames handed to a client at once; the next batch follows only
    /// while the client's channel stays writable.
    var deliveryBatch = 64
    /// Bytes of payload per batch (at least one message goes): the IPC
    /// connection gives up on a client whose queue passes 8 MiB, so a batch
    /// must stay well below that whatever the message size.
    var deliveryBatchBytes = 512 << 10
    /// Payload bytes held in memory by all sessions together ([store] memory_budget_bytes):
    /// outbound messages on the link and read ahead, inbound messages read ahead for
    /// clients. Everything else queued stays in the store only.
    var memoryBudgetBytes = 8 << 20
    /// Outbound messages read from the store at once, at most.
    var readBatch = 256
    /// Expired outbound messages the store gives up at once, at most (then the next batch).
    var expiryBatch = 1_024

    /// What one session may hold of the budget, so one long queue cannot starve the others.
    var sessionShareBytes: Int { max(1, memoryBudgetBytes / 4) }
}

/// The established link, as far as sessions care.
struct LinkInfo: Hashable, Sendable {
    /// WINDOW frames were negotiated.
    var flow: Bool
    /// The largest DATA body the server accepts (HELLO_OK MAX_FRAME); a larger message is given up.
    var maxFrame: UInt32 = FrameHeader.maxNegotiableBody
}

/// Who is asking: from the kernel's peer credentials, never from the client.
struct SessionClient: Hashable, Sendable {
    var id: UInt64
    var uid: UInt32
    var isAdmin: Bool
}

/// Every session, and the rules of `wire.md` §5 and `ipc.md` §6 between
/// local clients, the store and the link. A pure value: each event returns
/// the actions to perform; `SessionService` performs them and feeds back
/// their results (persistence completions, client writability).
///
/// Exactly-once rests on three orderings kept here: ACCEPTED only after the
/// outbound message is stored, ACK upstream only after the inbound message is
/// stored, MESSAGE in seq order from `deliveredSeq + 1` on every attach.
struct SessionRouter<Random: RandomNumberGenerator> {
    private(set) var sessions: [UInt64: Session] = [:]
    /// Closed ids, the most recent `ClosedSessionIDs.remembered`: not reused; OPEN of one answers SESSION_CLOSED.
    private(set) var closedIDs = ClosedSessionIDs()
    /// Sessions whose creation is being stored: their ids are taken.
    private(set) var creating: [UInt64: Session] = [:]
    /// Sessions closed locally while the link was down: CLOSE goes up on the next link.
    private var closeUpstream: Set<UInt64> = []
    /// Clients whose channel is full: no MESSAGE until they drain.
    private var blockedClients: Set<UInt64> = []
    /// The sessions (in `sessions`) attached to each client: a client's events touch its
    /// sessions only, never a scan of every session.
    private var sessionsByClient: [UInt64: Set<UInt64>] = [:]
    /// Attaches (OPEN of an existing session) waiting for SENDs still being stored: OPENED's
    /// SENT_SEQ must count every message that will be ACCEPTED, or a client resuming after it
    /// would send those again.
    private var attachesAwaitingStores: [UInt64: [(client: UInt64, request: UInt32)]] = [:]
    /// Whether a link is established, and whether it negotiated FLOW.
    private(set) var link: LinkInfo?
    private var ackFlushScheduled = false
    /// Sessions that stored inbound DATA since the last flush: only they are looked at.
    private var acksDue: Set<UInt64> = []
    private var reportedActive = false
    private var nextToken: UInt64 = 0
    /// Sessions with outbox messages that have a TTL.
    private var sessionsWithTTL: Set<UInt64> = []
    /// Payload bytes in memory in all sessions' windows, reads under way included
    /// (≤ `limits.memoryBudgetBytes`, give or take one message).
    private(set) var windowBytes = 0
    /// Sessions whose window waits for room in the budget: refilled, by priority, when some frees.
    private var budgetWaiters: Set<UInt64> = []
    /// Inbound payload bytes received and still being stored, all sessions: beyond the
    /// budget the link stops reading (TCP pushes back on the server) until half is stored.
    private(set) var storingInBytes = 0
    /// Whether the link was told to stop reading.
    private(set) var linkReadingPaused = false
    /// Outbound payload bytes queued (stored or being stored) per owner uid (`[limits] uid_outbox_bytes`).
    private(set) var outboxBytesByUID: [UInt32: Int] = [:]
    /// Wall-clock time in ms since the Unix epoch, for TTLs (a fixed clock in tests).
    var clock: () -> Int64 = { 0 }
    var limits: SessionLimits
    private var random: Random

    init(limits: SessionLimits, random: Random) {
        self.limits = limits
        self.random = random
    }

    // MARK: Start-up

    /// The stored sessions, before any client or link event.
    mutating func restore(_ stored: StoredSessions) {
        closedIDs = ClosedSessionIDs(stored.closed)
        for session in stored.open {
            let restored = Session(restoring: session)
            outboxBytesByUID[restored.owner, default: 0] += restored.outboxBytes
            sessions[session.record.id] = restored
            if restored.storeDeadlineMS != nil { sessionsWithTTL.insert(session.record.id) }
        }
    }

    // MARK: Client requests

    mutating func clientOpen(_ client: SessionClient, request: UInt32, _ open: IPCMessage.Open) -> [SessionAction] {
        var actions: [SessionAction] = []
        if open.createsSession {
            guard let service = open.service, !service.isEmpty else {
                return [.fail(client: client.id, request: request, .badRequest, "OPEN of a new session needs SERVICE")]
            }
            guard sessions.count + creating.count < limits.maxSessions else {
                return [.fail(client: client.id, request: request, .limitReached,
                              "imagentd already holds \(limits.maxSessions) sessions ([limits] max_sessions)")]
            }
            if let refusal = perUIDSessionRefusal(client.uid) {
                return [.fail(client: client.id, request: request, .limitReached, refusal)]
            }
            var session = Session(id: newID(), service: service, owner: client.uid, priority: open.priority ?? .normal,
                                  durable: open.durable ?? true)
            session.attachedClient = client.id
            creating[session.id] = session
            actions.append(.persist(.create(session.record), then: .created(client: client.id, request: request, session: session.id)))
            return actions
        }
        let id = open.session ?? 0
        switch authorize(client, id) {
        case .failure(let refusal):
            return [.fail(client: client.id, request: request, refusal.code, refusal.text)]
        case .success(var session):
            if let other = session.attachedClient, other != client.id {
                return [.fail(client: client.id, request: request, .sessionBusy, "session \(id) is attached to another client")]
            }
            if let priority = open.priority { session.priority = priority }
            session.attachedClient = client.id
            sessionsByClient[client.id, default: []].insert(id)
            // Redelivery starts after what a client acknowledged, whatever was sent before.
            session.dispatchedSeq = session.deliveredSeq
            resetInboundWindow(&session)
            sessions[id] = session
            actions.append(.watch(SessionChange(.attached, session)))
            if session.assignedSeq > session.sentSeq {
                // SENDs (of a client that went away, usually) are being stored: OPENED follows them.
                attachesAwaitingStores[id, default: []].append((client.id, request))
                return finish(actions)
            }
            actions.append(.reply(client: client.id, request: request, .opened(opened(session))))
            actions += deliver(id)
        }
        return finish(actions)
    }

    mutating func clientDetach(_ client: SessionClient, request: UInt32, session id: UInt64) -> [SessionAction] {
        switch authorize(client, id) {
        case .failure(let refusal):
            return [.fail(client: client.id, request: request, refusal.code, refusal.text)]
        case .success(var session):
            guard session.attachedClient == client.id else {
                return [.fail(client: client.id, request: request, .sessionBusy, "session \(id) is not attached to this client")]
            }
            session.attachedClient = nil
            detachIndex(client.id, id)
            resetInboundWindow(&session)
            sessions[id] = session
            return finish([.reply(client: client.id, request: request, .ok(.init())),
                           .watch(SessionChange(.detached, session, reason: "DETACH"))] + dropUnattended(id))
        }
    }

    mutating func clientClose(_ client: SessionClient, request: UInt32, session id: UInt64) -> [SessionAction] {
        switch authorize(client, id) {
        case .failure(let refusal):
            return [.fail(client: client.id, request: request, refusal.code, refusal.text)]
        case .success(let session):
            var actions: [SessionAction] = []
            if let other = session.attachedClient, other != client.id {
                actions.append(.event(client: other, .sessionState(.init(session: id, state: .closed, message: "closed by another client"))))
            }
            actions += closeLocally(id, tellUpstream: true, reason: "closed by a client",
                                    then: .closed(client: client.id, request: request, session: id))
            return finish(actions)
        }
    }

    mutating func clientSend(_ client: SessionClient, request: UInt32, _ send: IPCMessage.Send) -> [SessionAction] {
        if let refusal = refusal(client, send.session) {
            return [.fail(client: client.id, request: request, refusal.code, refusal.text)]
        }
        // Changed in place (see `take`): a copy would copy `storingOut` with every message.
        var session = take(send.session)
        defer { sessions[send.session] = session }
        if let other = session.attachedClient, other != client.id {
            return [.fail(client: client.id, request: request, .sessionBusy, "session \(send.session) is attached to another client")]
        }
        if case .failed(let code, let message) = session.upstream {
            return [.fail(client: client.id, request: request, .upstreamRejected, "the server refused the session (\(WireCode(rawValue: code))): \(message)")]
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
        let uidBytes = outboxBytesByUID[session.owner] ?? 0
        guard uidBytes + bytes <= limits.uidOutboxBytes else {
            return [.fail(client: client.id, request: request, .queueFull,
                          "uid \(session.owner) has \(uidBytes) bytes waiting in its sessions; \(bytes) more would pass "
                              + "[limits] uid_outbox_bytes = \(limits.uidOutboxBytes)")]
        }
        outboxBytesByUID[session.owner] = uidBytes + bytes
        session.assignedSeq += 1
        let seq = session.assignedSeq
        let token = takeToken()
        // TTL_MS 0 or absent: forever.
        let deadline = send.ttlMS.flatMap { $0 == 0 ? nil : clock() + Int64($0) }
        session.storingOut[seq] = (send.payload, token, false, deadline)
        session.storingOutBytes += send.payload.readableBytes
        return [.persist(.appendOutbound(session: send.session, seq: seq, payload: send.payload, expiresAtMS: deadline),
                         then: .accepted(client: client.id, request: request, session: send.session, seq: seq, token: token))]
    }

    mutating func clientAck(_ client: SessionClient, request: UInt32, session id: UInt64, seq: UInt64) -> [SessionAction] {
        if let refusal = refusal(client, id) {
            return [.fail(client: client.id, request: request, refusal.code, refusal.text)]
        }
        var session = take(id)
        defer { sessions[id] = session }
        if let other = session.attachedClient, other != client.id {
            return [.fail(client: client.id, request: request, .sessionBusy, "session \(id) is attached to another client")]
        }
        guard seq <= session.receivedSeq else {
            return [.fail(client: client.id, request: request, .badRequest,
                          "ACK \(seq) is beyond the last message of session \(id) (\(session.receivedSeq))")]
        }
        var actions: [SessionAction] = [.reply(client: client.id, request: request, .ok(.init()))]
        guard seq > session.deliveredSeq else { return actions }
        // The window starts after `dispatchedSeq`: only an ACK beyond it (of messages
        // the client had from an earlier attach) reaches into it.
        while let first = session.inbox.first, first.seq <= seq {
            session.inbox.removeFirst()
            session.inboxWindowBytes -= Session.windowCost(first.payload)
            windowBytes -= Session.windowCost(first.payload)
        }
        session.deliveredSeq = seq
        session.dispatchedSeq = max(session.dispatchedSeq, seq)
        actions.append(.persist(.markDelivered(session: id, seq: seq), then: .deliveredStored(session: id, seq: seq)))
        // Hysteresis: reopen at half the limit, so a reader at the edge does not flap the window.
        if session.pausedUpstream, session.inboxCount < limits.inboxMessages / 2 {
            session.pausedUpstream = false
            if session.upstream == .open, link?.flow == true {
                actions.append(.send(.window(WindowUpdate(session: id, window: Session.defaultWindow))))
            }
            actions.append(.event(client: client.id, .sessionState(.init(session: id, state: session.state))))
            actions.append(.watch(SessionChange(.state, session, reason: "the client caught up")))
        }
        return actions
    }

    /// A client's connection is gone: its sessions live on, detached.
    mutating func clientDisconnected(_ clientID: UInt64) -> [SessionAction] {
        blockedClients.remove(clientID)
        for (id, waiting) in attachesAwaitingStores {
            let kept = waiting.filter { $0.client != clientID }
            attachesAwaitingStores[id] = kept.isEmpty ? nil : kept
        }
        var actions: [SessionAction] = []
        for id in byPriority(sessionsByClient.removeValue(forKey: clientID) ?? []) {
            var session = take(id)
            session.attachedClient = nil
            resetInboundWindow(&session)
            sessions[id] = session
            actions.append(.watch(SessionChange(.detached, session, reason: "client disconnected")))
            actions += dropUnattended(id)
        }
        actions += wakeBudgetWaiters()
        for (id, session) in creating where session.attachedClient == clientID { creating[id]?.attachedClient = nil }
        return finish(actions)
    }

    /// Whether a client's channel accepts more: blocked clients get no
    /// MESSAGE; a writable one gets the next batch of each of its sessions.
    mutating func client(_ clientID: UInt64, writable: Bool) -> [SessionAction] {
        guard writable else {
            blockedClients.insert(clientID)
            return []
        }
        blockedClients.remove(clientID)
        var actions: [SessionAction] = []
        for id in byPriority(sessionsByClient[clientID] ?? []) {
            actions += deliver(id)
        }
        return actions
    }

    /// A batch of the session was just written to its client: the next one while the
    /// client's channel stays writable. Only this session: the client's others continue
    /// on their own batches, or all together when a blocked channel drains.
    mutating func batchWritten(session id: UInt64, client clientID: UInt64, writable: Bool) -> [SessionAction] {
        guard writable else {
            blockedClients.insert(clientID)
            return []
        }
        return deliver(id)
    }

    // MARK: Link

    mutating func linkEstablished(flow: Bool, maxFrame: UInt32 = FrameHeader.maxNegotiableBody) -> [SessionAction] {
        link = LinkInfo(flow: flow, maxFrame: maxFrame)
        var actions: [SessionAction] = []
        for id in closeUpstream.sorted() { actions.append(.send(.close(Close(session: id)))) }
        closeUpstream.removeAll()
        for id in sessionIDsByPriority {
            guard var session = sessions[id], !session.isFailed else { continue }
            session.upstream = .opening
            session.transmittedCount = 0
            session.locating = nil
            // The server resends from RESUME_AFTER + 1, which acknowledges everything up to it.
            session.ackedUpstreamSeq = session.receivedSeq
            sessions[id] = session
            actions.append(.send(.open(openFrame(session))))
        }
        return actions
    }

    mutating func linkLost() -> [SessionAction] {
        link = nil
        var actions: [SessionAction] = []
        for id in sessionIDsByPriority {
            guard var session = sessions[id], !session.isFailed else { continue }
            let wasOpen = session.upstream == .open
            session.upstream = .idle
            // Nothing in flight survives the link: OPEN_OK says where to resume.
            session.transmittedCount = 0
            session.locating = nil
            session.sendWindow = nil
            sessions[id] = session
            if wasOpen {
                if let client = session.attachedClient {
                    actions.append(.event(client: client, .sessionState(.init(session: id, state: .pending, message: "the link is down"))))
                }
                actions.append(.watch(SessionChange(.state, session, reason: "the link is down")))
            }
        }
        return actions
    }

    /// LINK_STATE to every client with a session attached.
    func linkStateChanged(_ state: LinkStateValue) -> [SessionAction] {
        sessionsByClient.keys.sorted().map { .event(client: $0, .linkState(.init(state: state))) }
    }

    /// A session frame from the server (DATA bodies already inflated).
    mutating func received(_ frame: Frame) -> [SessionAction] {
        switch frame {
        case .openOK(let ok): return openOK(ok)
        case .openFail(let fail): return openFail(fail)
        case .data(let data): return dataIn(data)
        case .ack(let ack): return ackIn(ack)
        case .window(let update): return windowIn(update)
        case .close(let close):
            guard sessions[close.session] != nil else {
                return [.log(.debug, "CLOSE for session \(close.session), which is not open here")]
            }
            var actions: [SessionAction] = []
            if let client = sessions[close.session]?.attachedClient {
                actions.append(.event(client: client, .sessionState(.init(session: close.session, state: .closed, message: "closed by the server"))))
            }
            actions += closeLocally(close.session, tellUpstream: false, reason: "closed by the server",
                                    then: .closed(client: nil, request: 0, session: close.session))
            return finish(actions)
        case .error(let error):
            guard error.code == .unknownSession else {
                return [.log(.warning, "server ERROR \(error.code) for session \(error.session): \(error.message ?? "")")]
            }
            guard link != nil, var session = sessions[error.session], !session.isFailed else {
                return [.log(.debug, "UNKNOWN_SESSION for session \(error.session), which is not open here")]
            }
            // The server forgot the session on this link: OPEN again and resume from its OPEN_OK.
            session.upstream = .opening
            session.transmittedCount = 0
            session.locating = nil
            session.sendWindow = nil
            sessions[error.session] = session
            return [.log(.info, "server does not know session \(error.session); opening it again"), .send(.open(openFrame(session)))]
        case .hello, .helloOK, .login, .loginOK, .loginFail, .ping, .pong, .goaway, .open:
            preconditionFailure("the link engine hands only session frames to the router, not \(frame.type)")
        }
    }

    /// Sends the ACKs due since `scheduleAckFlush`: one per session, the highest stored seq.
    mutating func flushAcks() -> [SessionAction] {
        ackFlushScheduled = false
        let due = acksDue
        acksDue.removeAll(keepingCapacity: true)
        guard link != nil else { return [] }
        var actions: [SessionAction] = []
        // Not a sort of every session per flush: only those with something to acknowledge.
        let ordered = due.compactMap { id in sessions[id].map { (priority: $0.priority.rawValue, id: id) } }
            .sorted { ($0.priority, $0.id) < ($1.priority, $1.id) }
        for (_, id) in ordered {
            guard let (upstream, received, acked) = sessions[id].map({ ($0.upstream, $0.receivedSeq, $0.ackedUpstreamSeq) }),
                  upstream == .open || upstream == .opening, received > acked else { continue }
            sessions[id]!.ackedUpstreamSeq = received
            actions.append(.send(.ack(Ack(session: id, seq: received))))
        }
        return actions
    }

    // MARK: Persistence completions

    mutating func persisted(_ continuation: PersistContinuation, _ result: Result<Void, SessionPersistenceError>) -> [SessionAction] {
        switch continuation {
        case .created(let client, let request, let id):
            guard var session = creating.removeValue(forKey: id) else {
                preconditionFailure("a create completed for session \(id), which was not being created")
            }
            if case .failure(let error) = result {
                return [.fail(client: client, request: request, error == .full ? .queueFull : .internal, "session not created: \(error)")]
            }
            var actions: [SessionAction] = []
            if session.attachedClient == client {
                actions.append(.reply(client: client, request: request, .opened(opened(session))))
            }
            if let attached = session.attachedClient { sessionsByClient[attached, default: []].insert(id) }
            if link != nil {
                session.upstream = .opening
                actions.append(.send(.open(openFrame(session))))
            }
            actions.append(.watch(SessionChange(.opened, session)))
            sessions[id] = session
            return finish(actions)

        case .accepted(let client, let request, let id, let seq, let token):
            return outboundStored(client: client, request: request, session: id, seq: seq, token: token, result)

        case .ackedStored(let id, let seq):
            switch result {
            case .failure(let error):
                // The outbox still holds them; the next OPEN_OK says the same again.
                return [.log(.warning, "session \(id): ACK \(seq) not stored: \(error)")]
            case .success:
                guard let client = sessions[id]?.attachedClient else { return [] }
                return [.event(client: client, .acked(.init(session: id, seq: seq)))]
            }

        case .inboundStored(let id, let seq, let token):
            return inboundStored(session: id, seq: seq, token: token, result)

        case .deliveredStored(let id, let seq):
            if case .failure(let error) = result {
                // A lost delivery mark costs a redelivery the client recognises by SEQ, nothing more.
                return [.log(.warning, "session \(id): delivered seq \(seq) not stored: \(error)")]
            }
            return []

        case .givenUp(let id, let seq, let code, let reason):
            var actions: [SessionAction] = []
            if case .failure(let error) = result {
                // The message stays stored: after a restart it is given up again (or sent, if the server lacks it).
                actions.append(.log(.warning, "session \(id): giving up seq \(seq) not stored: \(error)"))
            }
            actions.append(.log(.info, "session \(id): outbound seq \(seq) given up: \(reason)"))
            if let client = sessions[id]?.attachedClient {
                actions.append(.event(client: client, .expired(.init(session: id, seq: seq, code: code, message: reason))))
            }
            return actions

        case .closed(let client, let request, let id):
            var actions: [SessionAction] = []
            if case .failure(let error) = result {
                actions.append(.log(.warning, "session \(id): close not stored: \(error)"))
            }
            if let client { actions.append(.reply(client: client, request: request, .ok(.init()))) }
            return actions
        }
    }

    /// A read of the store for the outbound window completed.
    mutating func outboundLoaded(session id: UInt64, token: UInt64,
                                 _ result: Result<[StoredOutboundMessage], SessionPersistenceError>) -> [SessionAction] {
        guard let load = sessions[id]?.outboundLoad, load.token == token else { return [] }  // closed, or the window was reset
        var session = take(id)
        session.outboundLoad = nil
        windowBytes -= load.reserved
        var actions: [SessionAction] = []
        switch result {
        case .failure(let error):
            actions.append(.log(.warning, "session \(id): outbound messages not read from the store: \(error)"))
            actions.append(.storeFailed(reason: "session \(id): outbound messages not read from the store: \(error)"))
            sessions[id] = session
            return actions + wakeBudgetWaiters()
        case .success(let messages):
            // Nothing else changes the store after the window while a read is under way (no
            // expiry, no OPEN_OK beyond the window): these are the outbox's next messages.
            var added = 0
            for message in messages where message.seq > session.loadedThroughSeq && session.outboxWindow.count < session.outboxStored {
                session.outboxWindow.append(Session.OutboundEntry(seq: message.seq, payload: message.payload, deadlineMS: message.deadlineMS))
                session.loadedThroughSeq = message.seq
                session.loadedBytes += Session.windowCost(message.payload)
                windowBytes += Session.windowCost(message.payload)
                added += 1
            }
            // An expiry that waited for this read.
            actions += expireStored(&session, now: clock())
            sessions[id] = session
            if added == 0, session.outboxWindow.count < session.outboxStored {
                // Read again at once, it would find nothing again: wait for the next event instead.
                return actions + [.log(.warning, "session \(id): the store holds no outbound message after seq \(session.loadedThroughSeq)")]
            }
            return actions + transmit(id) + wakeBudgetWaiters()
        }
    }

    /// The store gave up expired outbound messages after the window.
    mutating func outboundExpired(session id: UInt64, token: UInt64,
                                  _ result: Result<ExpiredOutboundBatch, SessionPersistenceError>) -> [SessionAction] {
        guard sessions[id]?.expiring == token else { return [] }  // closed
        var session = take(id)
        session.expiring = nil
        var actions: [SessionAction] = []
        switch result {
        case .failure(let error):
            // Nothing was given up: try again in a second.
            actions.append(.log(.warning, "session \(id): expired messages not given up: \(error)"))
            actions.append(.expireAt(clock() + 1_000))
        case .success(let batch):
            let reason = "its TTL passed before it reached the server"
            // Each was after the window (no read runs meanwhile) and not on any link.
            for message in batch.messages {
                session.outboxStored -= 1
                session.outboxBytes -= message.bytes
                outboxBytesByUID[session.owner, default: 0] -= message.bytes
                session.givenUp += 1
                actions.append(.log(.info, "session \(id): outbound seq \(message.seq) given up: \(reason)"))
                if let client = session.attachedClient {
                    actions.append(.event(client: client, .expired(.init(session: id, seq: message.seq, code: .expired, message: reason))))
                }
            }
            session.storeDeadlineMS = batch.nextDeadlineMS
            let now = clock()
            if batch.messages.count >= limits.expiryBatch {
                actions += expireStored(&session, now: now)  // more are due
            } else if let next = batch.nextDeadlineMS {
                actions.append(.expireAt(next))
            }
        }
        sessions[id] = session
        return actions + transmit(id)
    }

    /// The store found the messages an OPEN_OK's LAST_ACKED covers beyond the window.
    mutating func outboundLocated(session id: UInt64, token: UInt64,
                                  _ result: Result<StoredOutboxSpan, SessionPersistenceError>) -> [SessionAction] {
        guard let pending = sessions[id]?.locating, pending.token == token else { return [] }  // closed, or the link changed
        sessions[id]?.locating = nil
        switch result {
        case .failure(let error):
            return [.storeFailed(reason: "session \(id): the acknowledged outbound messages not found in the store: \(error)")]
        case .success(let span):
            return completeOpenOK(id, lastAcked: pending.lastAcked, window: pending.window, beyondWindow: span)
        }
    }

    /// A read of the store for the inbound window completed.
    mutating func inboundLoaded(session id: UInt64, token: UInt64,
                                _ result: Result<[(seq: UInt64, payload: ByteBuffer)], SessionPersistenceError>) -> [SessionAction] {
        guard let load = sessions[id]?.inboundLoad, load.token == token else { return [] }  // closed, detached or re-attached
        var session = take(id)
        session.inboundLoad = nil
        windowBytes -= load.reserved
        switch result {
        case .failure(let error):
            sessions[id] = session
            return [.log(.warning, "session \(id): inbound messages not read from the store: \(error)"),
                    .storeFailed(reason: "session \(id): inbound messages not read from the store: \(error)")] + wakeBudgetWaiters()
        case .success(let messages):
            for message in messages where message.seq == session.dispatchedSeq + UInt64(session.inbox.count) + 1 {
                session.inbox.append(message)
                session.inboxWindowBytes += Session.windowCost(message.payload)
                windowBytes += Session.windowCost(message.payload)
            }
            sessions[id] = session
            if session.inbox.isEmpty {
                // Read again at once, it would find nothing again: wait for the next event instead.
                return [.log(.warning, "session \(id): the store holds no inbound message after seq \(session.dispatchedSeq)")]
            }
            return deliver(id) + wakeBudgetWaiters()
        }
    }

    // MARK: Counters for STATUS

    var outboxTotal: Int { sessions.values.reduce(0) { $0 + $1.outboxCount } }
    var inboxTotal: Int { sessions.values.reduce(0) { $0 + $1.inboxCount } }
    /// Payload bytes queued outbound (stored or being stored), all sessions.
    var outboxBytesTotal: Int { sessions.values.reduce(0) { $0 + $1.outboxTotalBytes } }
}

// MARK: - Rules

extension SessionRouter {
    private struct Refusal: Error {
        var code: IPCErrorCode
        var text: String
    }

    /// Why `client` may not use session `id`, or nil when it may (see `authorize`).
    private func refusal(_ client: SessionClient, _ id: UInt64) -> Refusal? {
        guard id != 0, let owner = sessions[id]?.owner else {
            if closedIDs.contains(id) { return Refusal(code: .sessionClosed, text: "session \(id) is closed") }
            return Refusal(code: .unknownSession, text: "no session \(id)")
        }
        guard owner == client.uid || client.isAdmin else {
            return Refusal(code: .permissionDenied, text: "session \(id) belongs to another user")
        }
        return nil
    }

    /// Takes session `id` (which must exist) out of `sessions` to change it; put it
    /// back with `sessions[id] = session` before anything else looks it up.
    ///
    /// `var session = sessions[id]; …; sessions[id] = session` changes a copy while
    /// the dictionary still holds the original, so the first change to a queue or
    /// a `storing` table copies all of it (copy on write): on the message path that
    /// was a copy of up to a window of entries per message, several times over.
    private mutating func take(_ id: UInt64) -> Session {
        guard let session = sessions.removeValue(forKey: id) else {
            preconditionFailure("session \(id) was looked up a moment ago")
        }
        return session
    }

    /// The session, if `client` may use it: its owner's uid, or an admin.
    private func authorize(_ client: SessionClient, _ id: UInt64) -> Result<Session, Refusal> {
        guard id != 0, let session = sessions[id] else {
            if closedIDs.contains(id) { return .failure(Refusal(code: .sessionClosed, text: "session \(id) is closed")) }
            return .failure(Refusal(code: .unknownSession, text: "no session \(id)"))
        }
        guard session.owner == client.uid || client.isAdmin else {
            return .failure(Refusal(code: .permissionDenied, text: "session \(id) belongs to another user"))
        }
        return .success(session)
    }

    private mutating func newID() -> UInt64 {
        while true {
            let id = random.next()
            if id != 0, sessions[id] == nil, creating[id] == nil, !closedIDs.contains(id) { return id }
        }
    }

    private mutating func takeToken() -> UInt64 {
        nextToken += 1
        return nextToken
    }

    /// High before normal before low; ids break ties so the order is stable. Sorts keys,
    /// not sessions: moving whole `Session` values made this the daemon's hottest path.
    private var sessionIDsByPriority: [UInt64] {
        sessions.map { (priority: $0.value.priority.rawValue, id: $0.key) }.sorted { ($0.priority, $0.id) < ($1.priority, $1.id) }.map(\.id)
    }

    /// `ids` of sessions in the table in the same order.
    private func byPriority(_ ids: Set<UInt64>) -> [UInt64] {
        ids.compactMap { id in sessions[id].map { (priority: $0.priority.rawValue, id: id) } }
            .sorted { ($0.priority, $0.id) < ($1.priority, $1.id) }.map(\.id)
    }

    /// Session `id` is no longer attached to `client`.
    private mutating func detachIndex(_ client: UInt64, _ id: UInt64) {
        sessionsByClient[client]?.remove(id)
        if sessionsByClient[client]?.isEmpty == true { sessionsByClient[client] = nil }
    }

    private func opened(_ session: Session) -> IPCMessage.Opened {
        IPCMessage.Opened(session: session.id, sessionState: session.state, sentSeq: session.sentSeq,
                          ackedSeq: session.ackedSeq, deliveredSeq: session.deliveredSeq)
    }

    private func openFrame(_ session: Session) -> Open {
        let window: UInt32? = link?.flow == true ? (session.pausedUpstream ? 0 : Session.defaultWindow) : nil
        return Open(session: session.id, service: session.service, resumeAfter: session.receivedSeq, window: window)
    }

    /// Forgets a session for good and keeps its id reserved.
    private mutating func closeLocally(_ id: UInt64, tellUpstream: Bool, reason: String,
                                       then continuation: PersistContinuation) -> [SessionAction] {
        guard var session = sessions.removeValue(forKey: id) else { return [] }
        if let client = session.attachedClient { detachIndex(client, id) }
        releaseWindows(&session)
        budgetWaiters.remove(id)
        outboxBytesByUID[session.owner, default: 0] -= session.outboxTotalBytes
        if outboxBytesByUID[session.owner] == 0 { outboxBytesByUID[session.owner] = nil }
        storingInBytes -= session.storingInBytes
        closedIDs.insert(id)
        var actions: [SessionAction] = [.watch(SessionChange(.closed, session, state: .closed, reason: reason))]
        for waiter in attachesAwaitingStores.removeValue(forKey: id) ?? [] {
            actions.append(.fail(client: waiter.client, request: waiter.request, .sessionClosed, "session \(id) was closed"))
        }
        if tellUpstream, !session.isFailed {
            if link != nil { actions.append(.send(.close(Close(session: id)))) } else { closeUpstream.insert(id) }
        }
        actions.append(.persist(.close(session: id), then: continuation))
        return actions + wakeBudgetWaiters() + resumeLinkReading()
    }

    // MARK: Memory windows

    /// Whether `bytes` more may come into memory for `session` (the one message of an
    /// empty budget always may, however large).
    private func fits(_ bytes: Int, _ session: Session) -> Bool {
        if windowBytes == 0 { return true }
        return windowBytes + bytes <= limits.memoryBudgetBytes && session.windowBytes + bytes <= limits.sessionShareBytes
    }

    /// Forgets the inbound window (after an attach, a detach): it is read again from the store.
    private mutating func resetInboundWindow(_ session: inout Session) {
        windowBytes -= session.inboxWindowBytes + (session.inboundLoad?.reserved ?? 0)
        session.inbox.removeAll()
        session.inboxWindowBytes = 0
        session.inboundLoad = nil
    }

    /// Gives back every byte the session holds in memory; its queues stay in the store.
    private mutating func releaseWindows(_ session: inout Session) {
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
    private mutating func refillOutbound(_ session: inout Session) -> [SessionAction] {
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
        budgetWaiters.remove(session.id)
        let reserved = max(room, 0)
        let token = takeToken()
        session.outboundLoad = Session.Load(token: token, reserved: reserved)
        windowBytes += reserved
        return [.loadOutbound(session: session.id, after: session.loadedThroughSeq, limit: limits.readBatch,
                              maxBytes: max(reserved, 1), token: token)]
    }

    /// Reads the next inbound messages from the store for an attached, reading client.
    private mutating func refillInbound(_ session: inout Session) -> [SessionAction] {
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
        budgetWaiters.remove(session.id)
        let reserved = max(room, 0)
        let token = takeToken()
        session.inboundLoad = Session.Load(token: token, reserved: reserved)
        windowBytes += reserved
        return [.loadInbound(session: session.id, after: windowEnd, limit: 2 * limits.deliveryBatch,
                             maxBytes: max(reserved, 1), token: token)]
    }

    /// Room freed in the budget: the sessions that waited for it read on, by priority.
    private mutating func wakeBudgetWaiters() -> [SessionAction] {
        guard !budgetWaiters.isEmpty, windowBytes < limits.memoryBudgetBytes else { return [] }
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
    private mutating func finish(_ actions: [SessionAction]) -> [SessionAction] {
        let active = !sessionsByClient.isEmpty || creating.values.contains { $0.attachedClient != nil }
        guard active != reportedActive else { return actions }
        reportedActive = active
        return actions + [.sessionsActive(active)]
    }

    // MARK: Outbound

    private mutating func outboundStored(client: UInt64, request: UInt32, session id: UInt64, seq: UInt64, token: UInt64,
                                         _ result: Result<Void, SessionPersistenceError>) -> [SessionAction] {
        guard let entry = sessions[id]?.storingOut[seq], entry.token == token else {
            // Closed meanwhile, or an earlier failure already gave this seq up.
            switch result {
            case .success where sessions[id] == nil:
                return [.fail(client: client, request: request, .sessionClosed, "session \(id) was closed")]
            case .success:
                return [.fail(client: client, request: request, .internal, "message \(seq) was stored after an earlier one failed"),
                        .log(.warning, "session \(id): store completed seq \(seq) after a failed append")] + releaseAttaches(id)
            case .failure(let error):
                return [.fail(client: client, request: request, error == .full ? .queueFull : .internal, "message not stored: \(error)")]
            }
        }
        var session = take(id)
        switch result {
        case .failure(let error):
            // Later appends of this session fail too (the store's contract): give their seqs back now.
            for later in session.storingOut.keys where later >= seq {
                let bytes = session.storingOut.removeValue(forKey: later)?.payload.readableBytes ?? 0
                session.storingOutBytes -= bytes
                outboxBytesByUID[session.owner, default: 0] -= bytes
            }
            session.assignedSeq = seq - 1
            sessions[id] = session
            return [.fail(client: client, request: request, error == .full ? .queueFull : .internal, "message not stored: \(error)")]
                + releaseAttaches(id)
        case .success:
            session.storingOut[seq]?.stored = true
            var actions: [SessionAction] = []
            // ACCEPTED in seq order, so a client's SEQs arrive increasing.
            while let next = session.storingOut[session.sentSeq + 1], next.stored {
                session.storingOut[session.sentSeq + 1] = nil
                session.sentSeq += 1
                let bytes = next.payload.readableBytes
                session.storingOutBytes -= bytes
                session.outboxBytes += bytes
                // The window keeps it when everything before it is in memory too, nothing reads or
                // gives up after the window, and there is room; otherwise it is read back from the
                // store when its turn comes.
                let cost = Session.windowCost(next.payload)
                let keep = session.outboxWindow.count == session.outboxStored && session.outboundLoad == nil
                    && session.expiring == nil && session.locating == nil && !session.isFailed && fits(cost, session)
                session.outboxStored += 1
                if keep {
                    session.outboxWindow.append(.init(seq: session.sentSeq, payload: next.payload, deadlineMS: next.deadlineMS))
                    session.loadedThroughSeq = session.sentSeq
                    session.loadedBytes += cost
                    windowBytes += cost
                } else if let deadline = next.deadlineMS {
                    session.storeDeadlineMS = min(session.storeDeadlineMS ?? deadline, deadline)
                }
                if let deadline = next.deadlineMS {
                    sessionsWithTTL.insert(id)
                    actions.append(.expireAt(deadline))
                }
            }
            actions.append(.reply(client: client, request: request, .accepted(.init(session: id, seq: seq))))
            sessions[id] = session
            actions += transmit(id)
            actions += releaseAttaches(id)
            return actions
        }
    }

    /// The OPENEDs that waited for the session's SENDs in flight, once none is left.
    private mutating func releaseAttaches(_ id: UInt64) -> [SessionAction] {
        // Looked up first: on the message path there is nothing waiting, and no session to copy.
        guard attachesAwaitingStores[id] != nil, let session = sessions[id], session.assignedSeq == session.sentSeq,
              let waiting = attachesAwaitingStores.removeValue(forKey: id) else { return [] }
        var actions: [SessionAction] = []
        for waiter in waiting where session.attachedClient == waiter.client {
            actions.append(.reply(client: waiter.client, request: waiter.request, .opened(opened(session))))
        }
        return actions + deliver(id)
    }

    /// DATA for what the window allows, after the entries already on this link.
    /// A message whose TTL passed, or too large for the server, is given up
    /// here instead: it was never on this link, and OPEN_OK said the server lacks it.
    private mutating func transmit(_ id: UInt64) -> [SessionAction] {
        guard let link, let upstream = sessions[id]?.upstream, upstream == .open else { return [] }
        var session = take(id)
        defer { sessions[id] = session }
        var actions: [SessionAction] = []
        let now = clock()
        while session.transmittedCount < session.outboxWindow.count {
            if let window = session.sendWindow, session.transmittedCount >= Int(window) { break }
            let message = session.outboxWindow[session.outboxWindow.index(session.outboxWindow.startIndex, offsetBy: session.transmittedCount)]
            if message.seq > session.heldThroughSeq, let deadline = message.deadlineMS, deadline <= now {
                actions += giveUp(&session, at: session.transmittedCount, code: .expired, reason: "its TTL passed before it reached the server")
                continue
            }
            if message.bytes > Int(link.maxFrame) {
                actions += giveUp(&session, at: session.transmittedCount, code: .payloadTooLarge,
                                  reason: "\(message.bytes) bytes exceed the server's MAX_FRAME of \(link.maxFrame) bytes")
                continue
            }
            session.heldThroughSeq = max(session.heldThroughSeq, message.seq)
            session.transmittedCount += 1
            let wireSeq = session.wireAckedSeq + UInt64(session.transmittedCount)
            actions.append(.send(.data(DataFrame(session: id, seq: wireSeq, body: message.payload))))
        }
        actions += refillOutbound(&session)
        return actions
    }

    /// Forgets the outbox entry at `offset` (not on the current link, not held by the server)
    /// and tells its client once that is stored.
    private mutating func giveUp(_ session: inout Session, at offset: Int, code: IPCErrorCode, reason: String) -> [SessionAction] {
        let entry = session.outboxWindow.remove(at: session.outboxWindow.index(session.outboxWindow.startIndex, offsetBy: offset))
        session.givenUp += 1
        session.outboxStored -= 1
        session.outboxBytes -= entry.bytes
        outboxBytesByUID[session.owner, default: 0] -= entry.bytes
        session.loadedBytes -= Session.windowCost(entry.payload)
        windowBytes -= Session.windowCost(entry.payload)
        return [.persist(.giveUpOutbound(session: session.id, seq: entry.seq),
                         then: .givenUp(session: session.id, seq: entry.seq, code: code, reason: reason))]
    }

    /// Gives up the session's messages whose TTL passed and that the server
    /// is known not to have; returns the next deadline still ahead, if any.
    /// The window is looked at here; after it, the store finds them (`expireStored`).
    private mutating func expire(_ id: UInt64, now: Int64) -> (actions: [SessionAction], next: Int64?) {
        guard sessions[id] != nil else {
            sessionsWithTTL.remove(id)
            return ([], nil)
        }
        var session = take(id)
        defer { sessions[id] = session }
        // An OPEN_OK waiting for the store: the window must stay as LAST_ACKED found it.
        if session.locating != nil { return ([], nil) }
        var actions: [SessionAction] = []
        var next: Int64?
        var waiting = false
        var offset = session.transmittedCount  // those before are on the current link: the server decides them
        while offset < session.outboxWindow.count {
            let entry = session.outboxWindow[session.outboxWindow.index(session.outboxWindow.startIndex, offsetBy: offset)]
            if let deadline = entry.deadlineMS {
                if entry.seq > session.heldThroughSeq, deadline <= now {
                    actions += giveUp(&session, at: offset, code: .expired, reason: "its TTL passed before it reached the server")
                    continue
                }
                waiting = true
                if entry.seq > session.heldThroughSeq { next = min(next ?? deadline, deadline) }
            }
            offset += 1
        }
        actions += expireStored(&session, now: now)
        if let deadline = session.storeDeadlineMS {
            waiting = true
            if deadline > now { next = min(next ?? deadline, deadline) }
        }
        if !waiting, session.expiring == nil,
           !session.outboxWindow.prefix(session.transmittedCount).contains(where: { $0.deadlineMS != nil }) {
            sessionsWithTTL.remove(id)
        }
        return (actions, next)
    }

    /// Asks the store to give up the expired messages after the window, when one may have
    /// expired and nothing else reads or changes what is after the window meanwhile.
    /// (Before a restart's first OPEN_OK the server may hold them all: nothing expires.)
    private mutating func expireStored(_ session: inout Session, now: Int64) -> [SessionAction] {
        guard session.expiring == nil else { return [] }
        guard session.outboxWindow.count < session.outboxStored else {
            session.storeDeadlineMS = nil  // everything stored is in the window
            return []
        }
        guard let deadline = session.storeDeadlineMS, deadline <= now, session.outboundLoad == nil, session.locating == nil,
              session.heldThroughSeq <= session.loadedThroughSeq else { return [] }
        let token = takeToken()
        session.expiring = token
        return [.expireOutbound(session: session.id, after: session.loadedThroughSeq, nowMS: now, limit: limits.expiryBatch, token: token)]
    }

    /// The TTL timer fired: give up what is due, everywhere.
    mutating func expireDue() -> [SessionAction] {
        let now = clock()
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
    private mutating func advanceAcked(_ id: UInt64, toWire wireSeq: UInt64, beyondWindow span: StoredOutboxSpan? = nil) -> [SessionAction] {
        guard let current = sessions[id]?.wireAckedSeq, wireSeq > current else { return [] }
        var session = take(id)
        defer { sessions[id] = session }
        let count = Int(min(wireSeq - session.wireAckedSeq, UInt64(session.outboxWindow.count)))
        var seq = session.ackedSeq
        var bytes = 0
        var cost = 0
        for _ in 0..<count {
            let entry = session.outboxWindow.removeFirst()
            seq = entry.seq
            bytes += entry.bytes
            cost += Session.windowCost(entry.payload)
        }
        session.loadedBytes -= cost
        windowBytes -= cost
        var covered = count
        if let span, span.count > 0 {
            seq = span.lastSeq
            bytes += span.bytes
            covered += span.count
        }
        guard covered > 0 else { return [] }
        session.outboxStored -= covered
        session.outboxBytes -= bytes
        outboxBytesByUID[session.owner, default: 0] -= bytes
        session.ackedSeq = seq
        session.loadedThroughSeq = max(session.loadedThroughSeq, seq)
        session.wireAckedSeq += UInt64(covered)
        session.transmittedCount = max(0, session.transmittedCount - count)
        return [.persist(.markAcked(session: id, seq: seq), then: .ackedStored(session: id, seq: seq))]
    }

    private mutating func openOK(_ ok: OpenOK) -> [SessionAction] {
        guard let session = sessions[ok.session], session.upstream == .opening, session.locating == nil else {
            return [.log(.debug, "OPEN_OK for session \(ok.session), which is not being opened")]
        }
        var actions: [SessionAction] = []
        // LAST_ACKED is a wire seq (see `Session`).
        var lastAcked = ok.lastAcked
        let highest = session.wireAckedSeq + UInt64(session.outboxStored)
        if lastAcked > highest {
            actions.append(.log(.warning, "session \(ok.session): server claims wire seq \(lastAcked) but only \(highest) were sent"))
            lastAcked = highest
        }
        if lastAcked < session.wireAckedSeq {
            actions.append(.log(.warning, "session \(ok.session): server lost wire seqs \(lastAcked + 1)…\(session.wireAckedSeq), which it had acknowledged"))
        }
        let covered = lastAcked > session.wireAckedSeq ? Int(lastAcked - session.wireAckedSeq) : 0
        guard covered > session.outboxWindow.count else {
            return actions + completeOpenOK(ok.session, lastAcked: lastAcked, window: ok.window, beyondWindow: nil)
        }
        // After a restart nothing is read back yet: the store says which seqs (gaps of
        // messages given up included) and how many bytes the acknowledged messages are.
        var pending = take(ok.session)
        if let load = pending.outboundLoad {
            windowBytes -= load.reserved
            pending.outboundLoad = nil
        }
        let token = takeToken()
        pending.locating = Session.PendingOpenOK(token: token, lastAcked: lastAcked, window: ok.window)
        let after = pending.loadedThroughSeq
        sessions[ok.session] = pending
        return actions + [.locateOutbound(session: ok.session, after: after, count: covered - pending.outboxWindow.count, token: token)]
    }

    /// The session is open upstream: what the server holds is acknowledged, the rest is sent.
    private mutating func completeOpenOK(_ id: UInt64, lastAcked: UInt64, window: UInt32?, beyondWindow span: StoredOutboxSpan?) -> [SessionAction] {
        var actions: [SessionAction] = []
        sessions[id]?.upstream = .open
        sessions[id]?.transmittedCount = 0
        sessions[id]?.sendWindow = link?.flow == true ? (window ?? Session.defaultWindow) : nil
        actions += advanceAcked(id, toWire: lastAcked, beyondWindow: span)
        // The server lacks everything after LAST_ACKED: from now on their TTLs count.
        if let acked = sessions[id]?.ackedSeq { sessions[id]?.heldThroughSeq = acked }
        if sessionsWithTTL.contains(id) {
            let (expired, next) = expire(id, now: clock())
            actions += expired
            if let next { actions.append(.expireAt(next)) }
        }
        if let (client, change) = sessions[id].map({ ($0.attachedClient, SessionChange(.state, $0)) }) {
            if let client {
                actions.append(.event(client: client, .sessionState(.init(session: id, state: change.state))))
            }
            actions.append(.watch(change))
        }
        actions += transmit(id)
        return actions
    }

    private mutating func openFail(_ fail: OpenFail) -> [SessionAction] {
        guard var session = sessions[fail.session] else {
            return [.log(.debug, "OPEN_FAIL for session \(fail.session), which is not open here")]
        }
        let text = fail.message ?? "\(fail.code)"
        var actions: [SessionAction] = []
        if fail.code == .sessionClosed {
            if let client = session.attachedClient {
                actions.append(.event(client: client, .sessionState(.init(session: fail.session, state: .closed, code: .sessionClosed, message: text))))
            }
            actions += closeLocally(fail.session, tellUpstream: false, reason: "the server closed the session: \(text)",
                                    then: .closed(client: nil, request: 0, session: fail.session))
            return finish(actions)
        }
        // FORBIDDEN or anything else: this session only fails; the link and the others go on.
        session = take(fail.session)
        session.upstream = .failed(code: fail.code.rawValue, message: text)
        releaseWindows(&session)
        budgetWaiters.remove(fail.session)
        sessions[fail.session] = session
        actions += wakeBudgetWaiters()
        actions.append(.log(.warning, "server refused session \(fail.session) (\(fail.code)): \(text)"))
        if let client = session.attachedClient {
            actions.append(.event(client: client, .sessionState(.init(session: fail.session, state: .failed, code: .upstreamRejected,
                                                                      message: "the server refused the session (\(fail.code)): \(text)"))))
        }
        actions.append(.watch(SessionChange(.state, session, reason: "the server refused the session (\(fail.code)): \(text)")))
        return actions
    }

    private mutating func ackIn(_ ack: Ack) -> [SessionAction] {
        // Only the counters: a copy of the session held across `advanceAcked` would make it copy the outbox.
        guard let (wireAckedSeq, transmittedCount) = sessions[ack.session].map({ ($0.wireAckedSeq, $0.transmittedCount) }) else {
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

    private mutating func windowIn(_ update: WindowUpdate) -> [SessionAction] {
        guard link?.flow == true else {
            return [.dropLink(reason: "WINDOW for session \(update.session) without FLOW negotiated")]
        }
        guard var session = sessions[update.session], session.upstream == .open else {
            return [.log(.debug, "WINDOW for session \(update.session), which is not open here")]
        }
        session.sendWindow = update.window
        sessions[update.session] = session
        return transmit(update.session)
    }

    // MARK: Inbound

    private mutating func dataIn(_ data: DataFrame) -> [SessionAction] {
        guard let upstream = sessions[data.session]?.upstream, upstream == .open || upstream == .opening else {
            return [.send(.error(ErrorFrame(session: data.session, code: .unknownSession, message: "session is not open")))]
        }
        var session = take(data.session)
        defer { sessions[data.session] = session }
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
        session.storingIn[data.seq] = (data.body, token, false)
        session.storingInBytes += data.body.readableBytes
        storingInBytes += data.body.readableBytes
        var actions: [SessionAction] = [.persist(.appendInbound(session: data.session, seq: data.seq, payload: data.body),
                                                 then: .inboundStored(session: data.session, seq: data.seq, token: token))]
        if !linkReadingPaused, storingInBytes > limits.memoryBudgetBytes {
            linkReadingPaused = true
            actions.append(.linkReading(false))
        }
        return actions
    }

    private mutating func inboundStored(session id: UInt64, seq: UInt64, token: UInt64,
                                        _ result: Result<Void, SessionPersistenceError>) -> [SessionAction] {
        guard let entry = sessions[id]?.storingIn[seq], entry.token == token else {
            return [.log(.debug, "session \(id): inbound seq \(seq) completed after it was given up")]
        }
        var session = take(id)
        switch result {
        case .failure(let error):
            // Unstored means unacknowledged: the server resends from RESUME_AFTER on the next link.
            for later in session.storingIn.keys where later >= seq {
                let bytes = session.storingIn.removeValue(forKey: later)?.payload.readableBytes ?? 0
                session.storingInBytes -= bytes
                storingInBytes -= bytes
            }
            session.storingSeq = seq - 1
            sessions[id] = session
            // Our disk's failure, not the server's: no ERROR upstream, the link backs off and resumes.
            return [.storeFailed(reason: "session \(id): inbound seq \(seq) not stored: \(error)")] + resumeLinkReading()
        case .success:
            session.storingIn[seq]?.stored = true
            while let next = session.storingIn[session.receivedSeq + 1], next.stored {
                session.storingIn[session.receivedSeq + 1] = nil
                session.receivedSeq += 1
                // Kept in the window for a reading client when it follows the window and
                // fits; otherwise read back from the store when the client gets to it.
                let bytes = next.payload.readableBytes
                session.storingInBytes -= bytes
                storingInBytes -= bytes
                // A blocked client counts as reading: it drains soon, and the window bounds what waits.
                if session.attachedClient != nil, session.inboundLoad == nil,
                   session.dispatchedSeq + UInt64(session.inbox.count) + 1 == session.receivedSeq,
                   fits(Session.windowCost(next.payload), session) {
                    session.inbox.append((session.receivedSeq, next.payload))
                    session.inboxWindowBytes += Session.windowCost(next.payload)
                    windowBytes += Session.windowCost(next.payload)
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
            return actions + resumeLinkReading()
        }
    }

    /// The link reads again once half of what was being stored is stored.
    private mutating func resumeLinkReading() -> [SessionAction] {
        guard linkReadingPaused, storingInBytes <= limits.memoryBudgetBytes / 2 else { return [] }
        linkReadingPaused = false
        return [.linkReading(true)]
    }

    /// DURABLE = 0 keeps nothing for a client that is not there: with no
    /// client attached, the inbox is dropped (marked delivered) as soon as it
    /// is stored — stored only so that the server's ACK and RESUME_AFTER stay right.
    private mutating func dropUnattended(_ session: inout Session) -> [SessionAction] {
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
    private mutating func dropUnattended(_ id: UInt64) -> [SessionAction] {
        guard sessions[id] != nil else { return [] }
        var session = take(id)
        let actions = dropUnattended(&session)
        sessions[id] = session
        return actions
    }

    /// The next batch of MESSAGEs for the session's client, if it is attached and reading.
    /// Messages leave the window as they are handed over; the next ones are read from the
    /// store (a client that attaches again gets them again from there).
    private mutating func deliver(_ id: UInt64) -> [SessionAction] {
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
        taken.dispatchedSeq += UInt64(batch.count)
        taken.inboxWindowBytes -= cost
        windowBytes -= cost
        var actions: [SessionAction] = batch.isEmpty ? [] : [.deliver(client: client, session: id, batch)]
        actions += refillInbound(&taken)
        sessions[id] = taken
        if bytes > 0 { actions += wakeBudgetWaiters() }
        return actions
    }
}

extension SessionLimits {
    /// The `[limits]` table of the configuration.
    init(_ limits: DaemonConfiguration.Limits) {
        self.init(maxSessions: limits.maxSessions, maxSessionsPerUID: limits.maxSessionsPerUID, maxPayloadBytes: limits.maxPayloadBytes,
                  outboxMessages: limits.outboxMessages, inboxMessages: limits.inboxMessages,
                  outboxBytes: limits.outboxBytes, uidOutboxBytes: limits.uidOutboxBytes)
    }

    /// `[limits]` and the memory budget of `[store]`.
    init(_ configuration: DaemonConfiguration) {
        self.init(configuration.limits)
        memoryBudgetBytes = configuration.store.memoryBudgetBytes
    }
}
