import AgentIPC
import IMLink
import NIOCore

/// The limits the router enforces (`[limits]` of the configuration).
struct SessionLimits: Hashable, Sendable {
    var maxSessions = 10_000
    var maxPayloadBytes = 1 << 20
    /// Outbound messages per session not yet acknowledged by the server.
    var outboxMessages = 10_000
    /// Inbound messages per session not yet acknowledged by a client; at this
    /// depth the session is paused upstream (WINDOW 0).
    var inboxMessages = 10_000
    /// MESSAGE frames handed to a client at once; the next batch follows only
    /// while the client's channel stays writable.
    var deliveryBatch = 64
    /// Bytes of payload per batch (at least one message goes): the IPC
    /// connection gives up on a client whose queue passes 8 MiB, so a batch
    /// must stay well below that whatever the message size.
    var deliveryBatchBytes = 512 << 10
}

/// The established link, as far as sessions care.
struct LinkInfo: Hashable, Sendable {
    /// WINDOW frames were negotiated.
    var flow: Bool
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
    /// Closed ids: never reused; OPEN of one answers SESSION_CLOSED.
    private(set) var closedIDs: Set<UInt64> = []
    /// Sessions whose creation is being stored: their ids are taken.
    private var creating: [UInt64: Session] = [:]
    /// Sessions closed locally while the link was down: CLOSE goes up on the next link.
    private var closeUpstream: Set<UInt64> = []
    /// Clients whose channel is full: no MESSAGE until they drain.
    private var blockedClients: Set<UInt64> = []
    /// Attaches (OPEN of an existing session) waiting for SENDs still being stored: OPENED's
    /// SENT_SEQ must count every message that will be ACCEPTED, or a client resuming after it
    /// would send those again.
    private var attachesAwaitingStores: [UInt64: [(client: UInt64, request: UInt32)]] = [:]
    /// Whether a link is established, and whether it negotiated FLOW.
    private(set) var link: LinkInfo?
    private var ackFlushScheduled = false
    private var reportedActive = false
    private var nextToken: UInt64 = 0
    var limits: SessionLimits
    private var random: Random

    init(limits: SessionLimits, random: Random) {
        self.limits = limits
        self.random = random
    }

    // MARK: Start-up

    /// The stored sessions, before any client or link event.
    mutating func restore(_ stored: StoredSessions) {
        closedIDs = stored.closed
        for session in stored.open { sessions[session.record.id] = Session(restoring: session) }
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
            // Redelivery starts after what a client acknowledged, whatever was sent before.
            session.dispatchedSeq = session.deliveredSeq
            sessions[id] = session
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
            sessions[id] = session
            return finish([.reply(client: client.id, request: request, .ok(.init()))])
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
            actions += closeLocally(id, tellUpstream: true, then: .closed(client: client.id, request: request, session: id))
            return finish(actions)
        }
    }

    mutating func clientSend(_ client: SessionClient, request: UInt32, _ send: IPCMessage.Send) -> [SessionAction] {
        switch authorize(client, send.session) {
        case .failure(let refusal):
            return [.fail(client: client.id, request: request, refusal.code, refusal.text)]
        case .success(var session):
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
            session.assignedSeq += 1
            let seq = session.assignedSeq
            let token = takeToken()
            session.storingOut[seq] = (send.payload, token, false)
            sessions[send.session] = session
            return [.persist(.appendOutbound(session: send.session, seq: seq, payload: send.payload),
                             then: .accepted(client: client.id, request: request, session: send.session, seq: seq, token: token))]
        }
    }

    mutating func clientAck(_ client: SessionClient, request: UInt32, session id: UInt64, seq: UInt64) -> [SessionAction] {
        switch authorize(client, id) {
        case .failure(let refusal):
            return [.fail(client: client.id, request: request, refusal.code, refusal.text)]
        case .success(var session):
            if let other = session.attachedClient, other != client.id {
                return [.fail(client: client.id, request: request, .sessionBusy, "session \(id) is attached to another client")]
            }
            guard seq <= session.receivedSeq else {
                return [.fail(client: client.id, request: request, .badRequest,
                              "ACK \(seq) is beyond the last message of session \(id) (\(session.receivedSeq))")]
            }
            var actions: [SessionAction] = [.reply(client: client.id, request: request, .ok(.init()))]
            guard seq > session.deliveredSeq else { return actions }
            session.inbox.removeFirst(Int(seq - session.deliveredSeq))
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
            }
            sessions[id] = session
            return actions
        }
    }

    /// A client's connection is gone: its sessions live on, detached.
    mutating func clientDisconnected(_ clientID: UInt64) -> [SessionAction] {
        blockedClients.remove(clientID)
        for (id, waiting) in attachesAwaitingStores {
            let kept = waiting.filter { $0.client != clientID }
            attachesAwaitingStores[id] = kept.isEmpty ? nil : kept
        }
        for (id, session) in sessions where session.attachedClient == clientID { sessions[id]?.attachedClient = nil }
        for (id, session) in creating where session.attachedClient == clientID { creating[id]?.attachedClient = nil }
        return finish([])
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
        for id in sessionIDsByPriority where sessions[id]?.attachedClient == clientID {
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

    mutating func linkEstablished(flow: Bool) -> [SessionAction] {
        link = LinkInfo(flow: flow)
        var actions: [SessionAction] = []
        for id in closeUpstream.sorted() { actions.append(.send(.close(Close(session: id)))) }
        closeUpstream.removeAll()
        for id in sessionIDsByPriority {
            guard var session = sessions[id], !session.isFailed else { continue }
            session.upstream = .opening
            session.transmittedSeq = session.ackedSeq
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
            session.transmittedSeq = session.ackedSeq
            session.sendWindow = nil
            sessions[id] = session
            if wasOpen, let client = session.attachedClient {
                actions.append(.event(client: client, .sessionState(.init(session: id, state: .pending, message: "the link is down"))))
            }
        }
        return actions
    }

    /// LINK_STATE to every client with a session attached.
    func linkStateChanged(_ state: LinkStateValue) -> [SessionAction] {
        Set(sessions.values.compactMap(\.attachedClient)).sorted().map { .event(client: $0, .linkState(.init(state: state))) }
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
            actions += closeLocally(close.session, tellUpstream: false, then: .closed(client: nil, request: 0, session: close.session))
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
            session.transmittedSeq = session.ackedSeq
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
        guard link != nil else { return [] }
        var actions: [SessionAction] = []
        for id in sessionIDsByPriority {
            guard var session = sessions[id], session.upstream == .open || session.upstream == .opening,
                  session.receivedSeq > session.ackedUpstreamSeq else { continue }
            session.ackedUpstreamSeq = session.receivedSeq
            sessions[id] = session
            actions.append(.send(.ack(Ack(session: id, seq: session.receivedSeq))))
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
            if link != nil {
                session.upstream = .opening
                actions.append(.send(.open(openFrame(session))))
            }
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

        case .closed(let client, let request, let id):
            var actions: [SessionAction] = []
            if case .failure(let error) = result {
                actions.append(.log(.warning, "session \(id): close not stored: \(error)"))
            }
            if let client { actions.append(.reply(client: client, request: request, .ok(.init()))) }
            return actions
        }
    }

    // MARK: Counters for STATUS

    var outboxTotal: Int { sessions.values.reduce(0) { $0 + $1.outboxCount } }
    var inboxTotal: Int { sessions.values.reduce(0) { $0 + $1.inboxCount } }
}

// MARK: - Rules

extension SessionRouter {
    private struct Refusal: Error {
        var code: IPCErrorCode
        var text: String
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

    private func opened(_ session: Session) -> IPCMessage.Opened {
        IPCMessage.Opened(session: session.id, sessionState: session.state, sentSeq: session.sentSeq,
                          ackedSeq: session.ackedSeq, deliveredSeq: session.deliveredSeq)
    }

    private func openFrame(_ session: Session) -> Open {
        let window: UInt32? = link?.flow == true ? (session.pausedUpstream ? 0 : Session.defaultWindow) : nil
        return Open(session: session.id, service: session.service, resumeAfter: session.receivedSeq, window: window)
    }

    /// Forgets a session for good and keeps its id reserved.
    private mutating func closeLocally(_ id: UInt64, tellUpstream: Bool, then continuation: PersistContinuation) -> [SessionAction] {
        guard let session = sessions.removeValue(forKey: id) else { return [] }
        closedIDs.insert(id)
        var actions: [SessionAction] = []
        for waiter in attachesAwaitingStores.removeValue(forKey: id) ?? [] {
            actions.append(.fail(client: waiter.client, request: waiter.request, .sessionClosed, "session \(id) was closed"))
        }
        if tellUpstream, !session.isFailed {
            if link != nil { actions.append(.send(.close(Close(session: id)))) } else { closeUpstream.insert(id) }
        }
        actions.append(.persist(.close(session: id), then: continuation))
        return actions
    }

    /// `sessionsActive` whenever whether any client holds a session changes.
    private mutating func finish(_ actions: [SessionAction]) -> [SessionAction] {
        let active = sessions.values.contains { $0.attachedClient != nil } || creating.values.contains { $0.attachedClient != nil }
        guard active != reportedActive else { return actions }
        reportedActive = active
        return actions + [.sessionsActive(active)]
    }

    // MARK: Outbound

    private mutating func outboundStored(client: UInt64, request: UInt32, session id: UInt64, seq: UInt64, token: UInt64,
                                         _ result: Result<Void, SessionPersistenceError>) -> [SessionAction] {
        guard var session = sessions[id], let entry = session.storingOut[seq], entry.token == token else {
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
        switch result {
        case .failure(let error):
            // Later appends of this session fail too (the store's contract): give their seqs back now.
            for later in session.storingOut.keys where later >= seq { session.storingOut[later] = nil }
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
                session.outbox.append((session.sentSeq, next.payload))
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
        guard let session = sessions[id], session.assignedSeq == session.sentSeq,
              let waiting = attachesAwaitingStores.removeValue(forKey: id) else { return [] }
        var actions: [SessionAction] = []
        for waiter in waiting where session.attachedClient == waiter.client {
            actions.append(.reply(client: waiter.client, request: waiter.request, .opened(opened(session))))
        }
        return actions + deliver(id)
    }

    /// DATA for what the window allows, from `transmittedSeq + 1`.
    private mutating func transmit(_ id: UInt64) -> [SessionAction] {
        guard link != nil, var session = sessions[id], session.upstream == .open else { return [] }
        var actions: [SessionAction] = []
        while session.transmittedSeq < session.sentSeq {
            if let window = session.sendWindow, session.transmittedSeq - session.ackedSeq >= UInt64(window) { break }
            let message = session.outbox[session.outbox.index(session.outbox.startIndex, offsetBy: Int(session.transmittedSeq - session.ackedSeq))]
            session.transmittedSeq += 1
            actions.append(.send(.data(DataFrame(session: id, seq: message.seq, body: message.payload))))
        }
        sessions[id] = session
        return actions
    }

    /// The server holds everything up to `seq`: drop it, record it, and tell the client once stored.
    private mutating func advanceAcked(_ id: UInt64, to seq: UInt64) -> [SessionAction] {
        guard var session = sessions[id], seq > session.ackedSeq else { return [] }
        let dropped = Int(min(seq, session.sentSeq) - session.ackedSeq)
        session.outbox.removeFirst(dropped)
        session.ackedSeq = seq
        session.transmittedSeq = max(session.transmittedSeq, seq)
        sessions[id] = session
        return [.persist(.markAcked(session: id, seq: seq), then: .ackedStored(session: id, seq: seq))]
    }

    private mutating func openOK(_ ok: OpenOK) -> [SessionAction] {
        guard var session = sessions[ok.session], session.upstream == .opening else {
            return [.log(.debug, "OPEN_OK for session \(ok.session), which is not being opened")]
        }
        var actions: [SessionAction] = []
        var lastAcked = ok.lastAcked
        if lastAcked > session.sentSeq {
            actions.append(.log(.warning, "session \(ok.session): server claims seq \(lastAcked) but only \(session.sentSeq) were sent"))
            lastAcked = session.sentSeq
        }
        if lastAcked < session.ackedSeq {
            actions.append(.log(.warning, "session \(ok.session): server lost messages \(lastAcked + 1)…\(session.ackedSeq), which it had acknowledged"))
        }
        session.upstream = .open
        session.transmittedSeq = session.ackedSeq
        session.sendWindow = link?.flow == true ? (ok.window ?? Session.defaultWindow) : nil
        sessions[ok.session] = session
        actions += advanceAcked(ok.session, to: lastAcked)
        if let client = session.attachedClient {
            actions.append(.event(client: client, .sessionState(.init(session: ok.session, state: session.state))))
        }
        actions += transmit(ok.session)
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
            actions += closeLocally(fail.session, tellUpstream: false, then: .closed(client: nil, request: 0, session: fail.session))
            return finish(actions)
        }
        // FORBIDDEN or anything else: this session only fails; the link and the others go on.
        session.upstream = .failed(code: fail.code.rawValue, message: text)
        sessions[fail.session] = session
        actions.append(.log(.warning, "server refused session \(fail.session) (\(fail.code)): \(text)"))
        if let client = session.attachedClient {
            actions.append(.event(client: client, .sessionState(.init(session: fail.session, state: .failed, code: .upstreamRejected,
                                                                      message: "the server refused the session (\(fail.code)): \(text)"))))
        }
        return actions
    }

    private mutating func ackIn(_ ack: Ack) -> [SessionAction] {
        guard let session = sessions[ack.session] else {
            return [.log(.debug, "ACK for session \(ack.session), which is not open here")]
        }
        guard ack.seq > session.ackedSeq else { return [] }
        guard ack.seq <= session.transmittedSeq else {
            return [.dropLink(reason: "ACK \(ack.seq) for session \(ack.session) beyond the last DATA sent (\(session.transmittedSeq))")]
        }
        return advanceAcked(ack.session, to: ack.seq) + transmit(ack.session)
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
        guard var session = sessions[data.session], session.upstream == .open || session.upstream == .opening else {
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
        session.storingSeq = data.seq
        let token = takeToken()
        session.storingIn[data.seq] = (data.body, token, false)
        sessions[data.session] = session
        return [.persist(.appendInbound(session: data.session, seq: data.seq, payload: data.body),
                         then: .inboundStored(session: data.session, seq: data.seq, token: token))]
    }

    private mutating func inboundStored(session id: UInt64, seq: UInt64, token: UInt64,
                                        _ result: Result<Void, SessionPersistenceError>) -> [SessionAction] {
        guard var session = sessions[id], let entry = session.storingIn[seq], entry.token == token else {
            return [.log(.debug, "session \(id): inbound seq \(seq) completed after it was given up")]
        }
        switch result {
        case .failure(let error):
            // Unstored means unacknowledged: the server resends from RESUME_AFTER on the next link.
            for later in session.storingIn.keys where later >= seq { session.storingIn[later] = nil }
            session.storingSeq = seq - 1
            sessions[id] = session
            return [.dropLink(reason: "session \(id): inbound seq \(seq) not stored: \(error)")]
        case .success:
            session.storingIn[seq]?.stored = true
            while let next = session.storingIn[session.receivedSeq + 1], next.stored {
                session.storingIn[session.receivedSeq + 1] = nil
                session.receivedSeq += 1
                session.inbox.append((session.receivedSeq, next.payload))
            }
            var actions: [SessionAction] = []
            if !ackFlushScheduled {
                ackFlushScheduled = true
                actions.append(.scheduleAckFlush)
            }
            if !session.pausedUpstream, link?.flow == true, session.inboxCount >= limits.inboxMessages {
                session.pausedUpstream = true
                if session.upstream == .open {
                    actions.append(.send(.window(WindowUpdate(session: id, window: 0))))
                }
                if let client = session.attachedClient {
                    actions.append(.event(client: client, .sessionState(.init(session: id, state: session.state))))
                }
            }
            sessions[id] = session
            actions += deliver(id)
            return actions
        }
    }

    /// The next batch of MESSAGEs for the session's client, if it is attached and reading.
    private mutating func deliver(_ id: UInt64) -> [SessionAction] {
        guard var session = sessions[id], let client = session.attachedClient, !blockedClients.contains(client),
              attachesAwaitingStores[id] == nil, session.dispatchedSeq < session.receivedSeq else { return [] }
        let skip = Int(session.dispatchedSeq - session.deliveredSeq)
        let available = min(limits.deliveryBatch, Int(session.receivedSeq - session.dispatchedSeq))
        var batch: [(seq: UInt64, payload: ByteBuffer)] = []
        var bytes = 0
        var index = session.inbox.index(session.inbox.startIndex, offsetBy: skip)
        while batch.count < available, batch.isEmpty || bytes + session.inbox[index].payload.readableBytes <= limits.deliveryBatchBytes {
            batch.append(session.inbox[index])
            bytes += session.inbox[index].payload.readableBytes
            index = session.inbox.index(after: index)
        }
        session.dispatchedSeq += UInt64(batch.count)
        sessions[id] = session
        return [.deliver(client: client, session: id, batch)]
    }
}

extension SessionLimits {
    /// The `[limits]` table of the configuration.
    init(_ limits: DaemonConfiguration.Limits) {
        self.init(maxSessions: limits.maxSessions, maxPayloadBytes: limits.maxPayloadBytes,
                  outboxMessages: limits.outboxMessages, inboxMessages: limits.inboxMessages)
    }
}
