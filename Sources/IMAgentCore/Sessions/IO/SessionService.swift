import AgentIPC
import AgentStore
import IMLink
import JSONText
import Logging
import NIOCore

/// The session layer's I/O half: feeds `SessionRouter` with client requests,
/// link frames and persistence completions, and performs the actions it
/// returns. It decides nothing itself. Lives on the daemon's one event loop,
/// the same loop as the link engine and the IPC server.
final class SessionService: LinkSessionDelegate {
    let loop: EventLoop
    private var router: SessionRouter<SystemRandomNumberGenerator>
    private let persistence: SessionPersistence
    private let link: LinkEngine
    private let logger: Logger
    private var clients: [UInt64: IPCClientConnection] = [:]
    /// Action queue: a persistence completion that arrives while actions are
    /// being performed (an in-memory store completes at once) queues behind
    /// them, so actions always run in the order the router returned them.
    private var pending = CircularBuffer<SessionAction>()
    private var draining = false
    /// What the router does once each store request it made is answered, by the request's tag.
    private var awaitingStore: [UInt64: StoreContinuation] = [:]
    private let trimmer: MemoryTrimmer
    /// Session changes for WATCH subscribers (set by `DaemonCore`).
    var onSessionChange: ((SessionChange) -> Void)?
    /// The one TTL timer: set for the earliest deadline the router announced.
    private var expiry: (deadline: Int64, task: Scheduled<Void>)?
    /// Outbound messages the store gave up (EXPIRED: TTL passed, too large for the server), for METRICS.
    private(set) var expiredTotal = 0
    /// Failures of the local store that dropped the link (not the server's fault), for STATUS and METRICS.
    private(set) var storeFailuresTotal = 0
    /// Each outbound message's time from ACCEPTED to the server's ACK (set by `DaemonCore`).
    var onAcknowledged: ((Duration) -> Void)?
    /// SENDs accepted, inbound messages stored, DATA written again after a reconnect, and
    /// MESSAGEs handed to a client again, for METRICS.
    var acceptedTotal: Int { router.totals.accepted }
    var receivedTotal: Int { router.totals.received }
    var resentTotal: Int { router.totals.resent }
    var redeliveredTotal: Int { router.totals.redelivered }
    /// The last of them, with its time (ms since the Unix epoch), for STATUS.
    private(set) var lastStoreFailure: (text: String, atMS: Int64)?
    /// The daemon is dropping the link itself (its store failed, the server broke the session
    /// protocol): the loss that follows is no message's doing (`PoisonWatch`).
    private var droppingLink = false

    init(limits: SessionLimits, persistence: SessionPersistence, link: LinkEngine, loop: EventLoop, logger: Logger) {
        self.loop = loop
        self.router = SessionRouter(limits: limits, random: SystemRandomNumberGenerator(), now: Self.now)
        self.persistence = persistence
        self.link = link
        self.logger = logger
        self.trimmer = MemoryTrimmer(loop: loop)
    }

    /// The time of an event, read once as it arrives.
    private static var now: SessionTime { SessionTime(wallMS: Int64(WallClock.nowMS()), instant: .now) }

    /// Loads the stored sessions and starts hearing the link. Call once, on
    /// the loop, before clients connect or the link starts.
    func start() -> EventLoopFuture<Void> {
        loop.preconditionInEventLoop()
        let bound = NIOLoopBound(self, eventLoop: loop)
        persistence.deliverOutcomes { outcomes in bound.value.persisted(outcomes) }
        return persistence.load().map { stored in
            let service = bound.value
            for warning in service.router.restore(stored) { service.logger.warning("\(warning)") }
            service.link.setSessionDelegate(service)
            let open = stored.sessions.count { $0.record.state == .open }
            service.logger.info("sessions loaded", metadata: ["open": "\(open)", "closed": "\(stored.sessions.count - open)"])
        }
    }

    // MARK: Clients

    func clientConnected(_ client: IPCClientConnection) {
        clients[client.id] = client
    }

    func clientDisconnected(_ client: IPCClientConnection) {
        clients[client.id] = nil
        run(router.clientDisconnected(client.id, now: Self.now))
    }

    func clientCanReceive(_ client: IPCClientConnection) {
        run(router.client(client.id, writable: client.isWritable, now: Self.now))
    }

    /// OPEN, CLOSE, DETACH, SEND and ACK.
    func handle(_ message: IPCMessage, request: UInt32, from client: IPCClientConnection) {
        // Admin rights matter only for another uid's session: asked then, not on every request.
        let target: UInt64? = switch message {
        case .open(let open): open.session
        case .close(let target), .detach(let target): target.session
        case .send(let send): send.session
        case .ack(let ack): ack.session
        default: nil
        }
        let foreign = target.flatMap { router.table[$0]?.owner }.map { $0 != client.peer.uid } ?? false
        let who = SessionClient(id: client.id, uid: client.peer.uid, isAdmin: foreign && client.isAdmin)
        switch message {
        case .open(let open): run(router.clientOpen(who, request: request, open, now: Self.now))
        case .close(let target): run(router.clientClose(who, request: request, session: target.session, now: Self.now))
        case .detach(let target): run(router.clientDetach(who, request: request, session: target.session, now: Self.now))
        case .send(let send): run(router.clientSend(who, request: request, send, now: Self.now))
        case .ack(let ack): run(router.clientAck(who, request: request, session: ack.session, seq: ack.seq, now: Self.now))
        case .hello, .status, .sessions, .metrics, .watch, .events, .connect, .disconnect, .reconnect, .reload, .ping, .ok, .welcome,
             .opened, .accepted, .result, .pong, .error, .message, .acked, .expired, .sessionState, .linkState, .event:
            preconditionFailure("\(message.op) is not a session request")
        }
    }

    /// SESSIONS: the caller's own sessions, every session for an admin.
    func sessionsJSON(for client: IPCClientConnection) -> String {
        var json = JSONWriter()
        json.beginObject()
        json.beginArray("sessions")
        for session in router.table.all.sorted(by: { $0.id < $1.id }) where client.isAdmin || session.owner == client.peer.uid {
            json.beginObject()
            json.field("session", session.id)
            json.field("service", session.service)
            json.field("state", session.state.description)
            if case .failed(_, let reason) = session.upstream { json.field("reason", reason) }
            json.field("priority", Int(session.priority.rawValue))
            json.field("owner", session.owner)
            json.field("attached", session.attachedClient != nil)
            json.field("sent_seq", session.outbound.acceptedSeq)
            json.field("acked_seq", session.outbound.serverAckedSeq)
            json.field("delivered_seq", session.inbound.clientAckedSeq)
            json.field("received_seq", session.inbound.receivedSeq)
            json.field("outbox", session.outboxCount)
            json.field("inbox", session.inboxCount)
            json.endObject()
        }
        json.endArray()
        json.endObject()
        return json.text
    }

    /// New `[limits]` from a reload: the router checks the next request against them.
    func updateLimits(_ limits: SessionLimits) {
        router.limits = limits
    }

    /// STATUS's `sessions` object.
    var counts: (sessions: Int, outbox: Int, inbox: Int) {
        (router.table.count, router.outboxTotal, router.inboxTotal)
    }

    /// The same figures over one uid's sessions, with their payload bytes queued outbound: what a non-admin may see.
    func counts(owner: UInt32) -> (sessions: Int, outbox: Int, inbox: Int, outboxBytes: Int) {
        var result = (sessions: 0, outbox: 0, inbox: 0, outboxBytes: 0)
        for session in router.table.all where session.owner == owner {
            result.sessions += 1
            result.outbox += session.outboxCount
            result.inbox += session.inboxCount
            result.outboxBytes += session.outboxTotalBytes
        }
        return result
    }

    /// STATUS's failed sessions, inside its `sessions` object: `failed`, how many (refused by the
    /// server, or quarantined), and `failed_sessions`, the first 16 by id with the reason their owner
    /// reads; `owner`'s only unless nil. For the whole daemon (`owner` nil) also `refused_total`
    /// and `quarantined_total`, since it started.
    func writeFailedSessions(into json: inout JSONWriter, owner: UInt32?) {
        var failed: [(session: UInt64, service: String, reason: String)] = []
        for session in router.table.all where owner == nil || session.owner == owner {
            if case .failed(_, let reason) = session.upstream { failed.append((session.id, session.service, reason)) }
        }
        json.field("failed", failed.count)
        json.beginArray("failed_sessions")
        for session in failed.sorted(by: { $0.session < $1.session }).prefix(16) {
            json.beginObject()
            json.field("session", session.session)
            json.field("service", session.service)
            json.field("reason", session.reason)
            json.endObject()
        }
        json.endArray()
        guard owner == nil else { return }
        json.field("refused_total", router.totals.refused)
        json.field("quarantined_total", router.totals.quarantined)
    }

    /// Payload bytes queued outbound, and payload bytes held in memory (the windows).
    var queueBytes: (outbox: Int, memory: Int) {
        (router.outboxBytesTotal, router.budget.held)
    }

    // MARK: Link

    func linkStateChanged(_ state: LinkStateValue) {
        run(router.linkStateChanged(state, now: Self.now))
    }

    func linkEstablished(negotiated: HelloResult, serverMaxFrame: UInt32, serverKeepsAcknowledged: Bool) {
        // A drop asked for while no link was up closed nothing: it says nothing about the next loss.
        droppingLink = false
        run(router.linkEstablished(flow: negotiated.features.contains(.flow), maxFrame: serverMaxFrame,
                                   serverKeepsAcknowledged: serverKeepsAcknowledged, now: Self.now))
    }

    func linkLost(reason: String, cause: ReconnectPolicy.FailureClass?) {
        // Only the server's side ending the link can be a message's doing: not a silent path, an
        // overloaded server, a user's command, nor the daemon dropping the link itself.
        let byServer = cause == .serverRefusing && !droppingLink
        droppingLink = false
        run(router.linkLost(byServer: byServer, now: Self.now))
    }

    func received(_ frame: Frame) {
        guard case .data(var data) = frame, data.compressed else {
            run(router.received(frame, now: Self.now))
            return
        }
        do {
            data.body = try Deflate.inflate(data.body, limit: router.limits.maxPayloadBytes)
            data.compressed = false
            run(router.received(.data(data), now: Self.now))
        } catch {
            droppingLink = true
            link.sessionProtocolViolation("DATA for session \(data.session) seq \(data.seq) does not inflate: \(error)")
        }
    }

    // MARK: Performing actions

    /// Performs the router's actions in order. Actions of an event that comes while others
    /// are being performed (a completion of an in-memory store, a delivery's next batch)
    /// queue behind them. The array is performed as it is, not copied into the queue first:
    /// this runs for every message.
    private func run(_ actions: [SessionAction]) {
        trimmer.activity()
        guard !draining else {
            pending.append(contentsOf: actions)
            return
        }
        draining = true
        defer { draining = false }
        // By index: each action is borrowed from the array, not copied out of it.
        for index in actions.indices { perform(actions[index]) }
        while let action = pending.popFirst() { perform(action) }
    }

    /// Answers to store requests (all of one group commit): each goes through the
    /// router, and its actions are performed, before the next, as if each came alone.
    private func persisted(_ outcomes: [PersistOutcome]) {
        for outcome in outcomes {
            guard let continuation = awaitingStore.removeValue(forKey: outcome.tag) else {
                preconditionFailure("the store completed operation \(outcome.tag), which was not submitted")
            }
            expiredTotal += Self.givenUp(continuation, outcome.result)
            run(router.stored(continuation, tag: outcome.tag, outcome.result, now: Self.now))
        }
    }

    /// Outbound messages the store's answer says it gave up: one for a message given up in
    /// the window, the batch for those after it; none when the store failed.
    private static func givenUp(_ continuation: StoreContinuation, _ result: Result<StoreResult, SessionPersistenceError>) -> Int {
        guard case .success(let answer) = result else { return 0 }
        switch continuation {
        case .givenUp: return 1
        case .expiredGivenUp: if case .expiredOutbound(let batch) = answer { return batch.messages.count } else { return 0 }
        default: return 0
        }
    }

    private func perform(_ action: SessionAction) {
        switch action {
        case .send(let frame):
            if !link.send(frame) {
                // No link right now: linkLost has come or is coming, and the next link resumes.
                logger.debug("session frame not sent: no link", metadata: ["frame": "\(frame.type)", "session": "\(frame.session)"])
            }
        case .store(let operation, let tag, let continuation):
            awaitingStore[tag] = continuation
            persistence.submit(operation, tag: tag)
        case .reply(let client, let request, let message):
            clients[client]?.reply(to: request, message)
        case .fail(let client, let request, let code, let text):
            clients[client]?.fail(request, code, text)
        case .event(let client, let message):
            clients[client]?.send(event: message)
        case .deliver(let clientID, let session, let messages):
            guard let client = clients[clientID] else { return }
            for message in messages {
                client.send(event: .message(.init(session: session, seq: message.seq, payload: message.payload)))
            }
            run(router.batchWritten(session: session, client: clientID, writable: client.isWritable, now: Self.now))
        case .dropLink(let reason):
            logger.warning("dropping the link", metadata: ["reason": "\(reason)"])
            droppingLink = true
            link.sessionProtocolViolation(reason)
        case .clientReading(let client, let on):
            clients[client]?.setReading(on)
        case .linkReading(let on):
            logger.info(on ? "reading from the link again" : "inbound data waits for the store: not reading from the link meanwhile")
            link.setReading(on)
        case .storeFailed(let reason):
            storeFailuresTotal += 1
            lastStoreFailure = (reason, Int64(WallClock.nowMS()))
            logger.error("the local store failed; dropping the link to resume from what is stored (no ERROR to the server)",
                         metadata: ["reason": "\(reason)"])
            droppingLink = true
            link.localFailure(reason)
        case .scheduleAckFlush:
            // One ACK per session for everything stored in this turn of the loop.
            let bound = NIOLoopBound(self, eventLoop: loop)
            loop.execute { bound.value.run(bound.value.router.flushAcks(now: Self.now)) }
        case .sessionsActive(let active):
            link.setSessionsActive(active)
        case .watch(let change):
            onSessionChange?(change)
        case .expireAt(let deadline):
            scheduleExpiry(at: deadline)
        case .acknowledged(let latency):
            onAcknowledged?(latency)
        case .log(let level, let text):
            switch level {
            case .debug: logger.debug("\(text)")
            case .info: logger.info("\(text)")
            case .warning: logger.warning("\(text)")
            }
        }
    }

    private func scheduleExpiry(at deadline: Int64) {
        if let expiry, expiry.deadline <= deadline { return }
        expiry?.task.cancel()
        let delay = max(0, deadline - Int64(WallClock.nowMS()))
        let bound = NIOLoopBound(self, eventLoop: loop)
        let task = loop.scheduleTask(in: .milliseconds(delay)) {
            let service = bound.value
            service.expiry = nil
            service.run(service.router.expireDue(now: Self.now))
        }
        expiry = (deadline, task)
    }
}
