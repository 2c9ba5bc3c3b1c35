import NIOCore

/// `SessionPersistence` kept in memory: what the session tests run against
/// (the daemon runs on `SQLiteSessionPersistence`). It survives a restart of the session layer
/// within one process (the object outlives the router), not of the process.
/// Every operation completes at once, in order, on `loop`.
final class InMemorySessionPersistence: SessionPersistence {
    let loop: EventLoop
    /// Stored messages (outbound plus inbound, all sessions) beyond which appends fail with `.full`.
    var capacity: Int
    private var sessions: [UInt64: StoredSession] = [:]
    private var closed: Set<UInt64> = []
    private var stored = 0

    init(loop: EventLoop, capacity: Int = .max) {
        self.loop = loop
        self.capacity = capacity
    }

    func load() -> EventLoopFuture<StoredSessions> {
        loop.makeSucceededFuture(StoredSessions(open: sessions.values.sorted { $0.record.id < $1.record.id }, closed: closed))
    }

    func createSession(_ record: StoredSessionRecord) -> EventLoopFuture<Void> {
        guard sessions[record.id] == nil, !closed.contains(record.id) else {
            return loop.makeFailedFuture(SessionPersistenceError.failed("session \(record.id) exists already"))
        }
        sessions[record.id] = StoredSession(record: record, ackedSeq: 0, deliveredSeq: 0, outbox: [], inbox: [], sentSeq: 0, receivedSeq: 0)
        return loop.makeSucceededVoidFuture()
    }

    func appendOutbound(session: UInt64, seq: UInt64, payload: ByteBuffer, expiresAtMS: Int64?) -> EventLoopFuture<Void> {
        change(session) { stored in
            guard seq == stored.sentSeq + 1 else { throw SessionPersistenceError.failed("outbound seq \(seq) after \(stored.sentSeq)") }
            stored.outbox.append((seq, payload))
            stored.outboxDeadlines[seq] = expiresAtMS
            stored.sentSeq = seq
            return 1
        }
    }

    func giveUpOutbound(session: UInt64, seq: UInt64) -> EventLoopFuture<Void> {
        change(session) { stored in
            guard let index = stored.outbox.firstIndex(where: { $0.seq == seq }) else { return 0 }
            stored.outbox.remove(at: index)
            stored.outboxDeadlines[seq] = nil
            stored.givenUp += 1
            return -1
        }
    }

    func markAcked(session: UInt64, seq: UInt64) -> EventLoopFuture<Void> {
        change(session) { stored in
            guard seq > stored.ackedSeq else { return 0 }
            let before = stored.outbox.count
            stored.outbox.removeAll { $0.seq <= seq }
            stored.ackedSeq = seq
            return stored.outbox.count - before
        }
    }

    func appendInbound(session: UInt64, seq: UInt64, payload: ByteBuffer) -> EventLoopFuture<Void> {
        change(session) { stored in
            guard seq == stored.receivedSeq + 1 else { throw SessionPersistenceError.failed("inbound seq \(seq) after \(stored.receivedSeq)") }
            stored.inbox.append((seq, payload))
            stored.receivedSeq = seq
            return 1
        }
    }

    func markDelivered(session: UInt64, seq: UInt64) -> EventLoopFuture<Void> {
        change(session) { stored in
            guard seq > stored.deliveredSeq else { return 0 }
            let before = stored.inbox.count
            stored.inbox.removeAll { $0.seq <= seq }
            stored.deliveredSeq = seq
            return stored.inbox.count - before
        }
    }

    func closeSession(_ session: UInt64) -> EventLoopFuture<Void> {
        if let gone = sessions.removeValue(forKey: session) {
            stored -= gone.outbox.count + gone.inbox.count
        }
        closed.insert(session)
        return loop.makeSucceededVoidFuture()
    }

    /// Applies `body` (which returns the change in stored messages) to one session.
    private func change(_ id: UInt64, _ body: (inout StoredSession) throws -> Int) -> EventLoopFuture<Void> {
        guard var session = sessions[id] else {
            return loop.makeFailedFuture(SessionPersistenceError.failed("no session \(id)"))
        }
        do {
            let delta = try body(&session)
            if delta > 0, stored + delta > capacity { return loop.makeFailedFuture(SessionPersistenceError.full) }
            stored += delta
            sessions[id] = session
            return loop.makeSucceededVoidFuture()
        } catch {
            return loop.makeFailedFuture(error)
        }
    }
}
