import IMLink
import NIOCore

/// All sessions of all agents and the rules of `wire.md` section 5, as a pure
/// value: the server asks, the book answers, and it queues the store writes
/// and the acknowledgements that the answers imply.
///
/// Deliberate decisions where the specification is silent:
/// - `RESUME_AFTER` beyond the last seq this server assigned (a server that
///   lost its memory) moves the server→agent sequence forward to it, so new
///   messages are never mistaken for duplicates by the agent.
/// - An `ACK` above anything ever assigned is a protocol error; one above
///   what this connection sent but within what was assigned is accepted (the
///   agent got it on an earlier connection).
/// - `ACK` and `WINDOW` for a session that is not open here are ignored: they
///   race with `CLOSE` and carry nothing to lose.
struct SessionBook {
    enum OpenOutcome: Hashable, Sendable {
        case opened(OpenOK, created: Bool)
        case failed(OpenFail)
    }

    enum DataOutcome: Hashable, Sendable {
        /// New: stored (the ACK is queued) and handed to the service.
        case accepted(Service)
        /// Already held: discarded, the ACK is queued again.
        case duplicate
        case notOpen
        case gap(expected: UInt64)
    }

    enum AckOutcome: Hashable, Sendable {
        case accepted
        case notOpen
        case beyondAssigned(UInt64)
    }

    /// The server→agent window when OPEN carries none (`wire.md` section 5).
    static let defaultWindow: UInt32 = 1024

    private(set) var sessions: [SessionKey: Session] = [:]
    private(set) var closed: Set<SessionKey> = []
    /// The window announced to agents in OPEN_OK.
    let receiveWindow: UInt32

    private var operations: [StoreOperation] = []
    private var dirty: Set<SessionKey> = []
    private var acksDue: Set<SessionKey> = []
    /// Sessions that may have DATA to send (new messages, a wider window, an ACK).
    private(set) var sendable: Set<SessionKey> = []

    init(receiveWindow: UInt32, restoring state: StoredState = StoredState()) {
        self.receiveWindow = receiveWindow
        self.closed = state.closed
        for record in state.sessions {
            var session = Session(key: record.key, service: record.service)
            session.inboundLast = record.inboundLast
            session.outboundLast = record.outboundLast
            session.outboundAcked = record.outboundAcked
            for message in state.messages[record.key, default: []] where message.seq > record.outboundAcked {
                session.outbox.append(message)
            }
            sessions[record.key] = session
        }
    }

    /// OPEN: create or resume, attach to `connection`, and forget what the agent already holds.
    mutating func open(_ open: Open, agent: String, service: Service, connection: ConnectionID, flow: Bool) -> OpenOutcome {
        let key = SessionKey(agent: agent, id: open.session)
        if closed.contains(key) {
            return .failed(OpenFail(session: open.session, code: .sessionClosed, message: "session \(open.session) was closed"))
        }
        var created = false
        var session = sessions[key] ?? {
            created = true
            return Session(key: key, service: service)
        }()
        guard session.service == service else {
            return .failed(OpenFail(session: open.session, code: .forbidden,
                                    message: "session \(open.session) talks to \(session.service.rawValue), not \(service.rawValue)"))
        }
        if open.resumeAfter > session.outboundLast {
            session.outboundLast = open.resumeAfter
        }
        acknowledge(&session, through: open.resumeAfter)
        session.attachment = Session.Attachment(connection: connection, sentThrough: max(open.resumeAfter, session.outboundAcked),
                                                window: flow ? (open.window ?? Self.defaultWindow) : nil)
        sessions[key] = session
        dirty.insert(key)
        sendable.insert(key)
        return .opened(OpenOK(session: open.session, lastAcked: session.inboundLast, window: receiveWindow), created: created)
    }

    mutating func receive(_ data: DataFrame, agent: String, connection: ConnectionID) -> DataOutcome {
        let key = SessionKey(agent: agent, id: data.session)
        guard var session = sessions[key], session.attachment?.connection == connection else { return .notOpen }
        if data.seq <= session.inboundLast {
            acksDue.insert(key)
            return .duplicate
        }
        guard data.seq == session.inboundLast + 1 else { return .gap(expected: session.inboundLast + 1) }
        session.inboundLast = data.seq
        sessions[key] = session
        dirty.insert(key)
        acksDue.insert(key)
        return .accepted(session.service)
    }

    mutating func receive(_ ack: Ack, agent: String, connection: ConnectionID) -> AckOutcome {
        let key = SessionKey(agent: agent, id: ack.session)
        guard var session = sessions[key], var attachment = session.attachment, attachment.connection == connection else {
            return .notOpen
        }
        guard ack.seq <= session.outboundLast else { return .beyondAssigned(session.outboundLast) }
        attachment.sentThrough = max(attachment.sentThrough, ack.seq)
        session.attachment = attachment
        acknowledge(&session, through: ack.seq)
        sessions[key] = session
        sendable.insert(key)
        return .accepted
    }

    /// WINDOW: replaces the server→agent window. False when the session is not open here.
    mutating func receive(_ window: WindowUpdate, agent: String, connection: ConnectionID) -> Bool {
        let key = SessionKey(agent: agent, id: window.session)
        guard var session = sessions[key], session.attachment?.connection == connection else { return false }
        session.attachment?.window = window.window
        sessions[key] = session
        sendable.insert(key)
        return true
    }

    /// CLOSE: the session ends for good, whoever held it.
    mutating func close(_ key: SessionKey) {
        sessions[key] = nil
        closed.insert(key)
        dirty.remove(key)
        acksDue.remove(key)
        sendable.remove(key)
        operations.append(.closeSession(key))
    }

    /// The connection is gone: its sessions wait, unattached, for the next OPEN.
    mutating func detach(_ connection: ConnectionID) {
        for (key, session) in sessions where session.attachment?.connection == connection {
            sessions[key]?.attachment = nil
            sendable.remove(key)
            acksDue.remove(key)
        }
    }

    /// Assigns the next server→agent seq to a new message. Nil when the session is gone.
    @discardableResult
    mutating func enqueue(_ key: SessionKey, compressed: Bool, body: ByteBuffer) -> UInt64? {
        guard var session = sessions[key] else { return nil }
        session.outboundLast += 1
        let message = OutboundMessage(seq: session.outboundLast, compressed: compressed, body: body)
        session.outbox.append(message)
        sessions[key] = session
        operations.append(.insertMessage(key, message))
        dirty.insert(key)
        sendable.insert(key)
        return message.seq
    }

    /// What may be written now to the session's connection, within its window,
    /// at most `limit` frames and none above `maxBody` bytes (the agent's MAX_FRAME).
    ///
    /// Returns the frames and, when sending is blocked by a message too large
    /// for the agent, that message's seq.
    mutating func takeSendable(_ key: SessionKey, limit: Int, maxBody: UInt32) -> (frames: [DataFrame], oversized: UInt64?) {
        sendable.remove(key)
        guard var session = sessions[key], var attachment = session.attachment else { return ([], nil) }
        var frames: [DataFrame] = []
        var oversized: UInt64?
        while attachment.sentThrough < session.outboundLast, frames.count < limit {
            if let window = attachment.window, attachment.sentThrough - session.outboundAcked >= UInt64(window) { break }
            let index = Int(attachment.sentThrough - session.outboundAcked)
            let message = session.outbox[session.outbox.index(session.outbox.startIndex, offsetBy: index)]
            guard message.body.readableBytes <= Int(maxBody) else {
                oversized = message.seq
                break
            }
            frames.append(DataFrame(session: key.id, seq: message.seq, compressed: message.compressed, body: message.body))
            attachment.sentThrough = message.seq
        }
        if frames.count == limit { sendable.insert(key) }
        session.attachment = attachment
        sessions[key] = session
        return (frames, oversized)
    }

    /// The coalesced ACKs due since the last call: one per session, the newest seq.
    mutating func takeAcks() -> [(ConnectionID, Ack)] {
        defer { acksDue.removeAll(keepingCapacity: true) }
        return acksDue.sorted().compactMap { key in
            guard let session = sessions[key], let attachment = session.attachment else { return nil }
            return (attachment.connection, Ack(session: key.id, seq: session.inboundLast))
        }
    }

    /// The store writes queued since the last call, in order, sessions' counters last.
    mutating func takeOperations() -> [StoreOperation] {
        var result = operations
        operations.removeAll(keepingCapacity: true)
        for key in dirty.sorted() {
            if let session = sessions[key] { result.append(.saveSession(session.record)) }
        }
        dirty.removeAll(keepingCapacity: true)
        return result
    }

    private mutating func acknowledge(_ session: inout Session, through seq: UInt64) {
        guard seq > session.outboundAcked else { return }
        while let first = session.outbox.first, first.seq <= seq {
            session.outbox.removeFirst()
        }
        session.outboundAcked = seq
        operations.append(.deleteMessages(session.key, through: seq))
        dirty.insert(session.key)
    }
}
