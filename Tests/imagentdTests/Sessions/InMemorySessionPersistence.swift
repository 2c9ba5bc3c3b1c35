import NIOCore

@testable import IMAgentCore

/// `SessionPersistence` kept in memory: what the session tests run against
/// (the daemon runs on `SQLiteSessionPersistence`). It survives a restart of the session layer
/// within one process (the object outlives the router), not of the process.
/// Every operation completes at once, in order, on `loop` (a submitted one calls the receiver
/// before `submit` returns).
final class InMemorySessionPersistence: SessionPersistence {
    let loop: EventLoop
    /// Stored messages (outbound plus inbound, all sessions) beyond which appends fail with `.full`.
    var capacity: Int
    /// A session as kept here: counters and both queues with their payloads.
    private struct Kept {
        var index: StoredSession
        var outbox: [StoredOutboundMessage] = []
        var inbox: [(seq: UInt64, payload: ByteBuffer)] = []

        /// `index` with the outbox's size as it is now.
        var stored: StoredSession {
            StoredSession(record: index.record, ackedSeq: index.ackedSeq, deliveredSeq: index.deliveredSeq,
                          outbox: outbox.map { StoredOutboxEntry(seq: $0.seq, bytes: $0.payload.readableBytes, deadlineMS: $0.deadlineMS) },
                          sentSeq: index.sentSeq, receivedSeq: index.receivedSeq, givenUp: index.givenUp)
        }
    }
    private var sessions: [UInt64: Kept] = [:]
    private var closed: Set<UInt64> = []
    private var stored = 0
    private var receiver: (([PersistOutcome]) -> Void)?

    init(loop: EventLoop, capacity: Int = .max) {
        self.loop = loop
        self.capacity = capacity
    }

    func load() -> EventLoopFuture<StoredSessions> {
        loop.makeSucceededFuture(StoredSessions(open: sessions.values.map(\.stored).sorted { $0.record.id < $1.record.id },
                                                closed: closed))
    }

    func readOutbound(session: UInt64, after seq: UInt64, limit: Int, maxBytes: Int) -> EventLoopFuture<[StoredOutboundMessage]> {
        let outbox = sessions[session]?.outbox ?? []
        let read = Self.range(outbox.map { ($0.seq, $0.payload) }, after: seq, limit: limit, maxBytes: maxBytes)
        return loop.makeSucceededFuture(Array(outbox.lazy.filter { $0.seq > seq }.prefix(read.count)))
    }

    func giveUpExpiredOutbound(session: UInt64, after seq: UInt64, nowMS: Int64, limit: Int) -> EventLoopFuture<ExpiredOutboundBatch> {
        guard var kept = sessions[session] else {
            return loop.makeFailedFuture(SessionPersistenceError.failed("no session \(session)"))
        }
        let due = kept.outbox.filter { $0.seq > seq && ($0.deadlineMS ?? .max) <= nowMS }
            .sorted { ($0.deadlineMS!, $0.seq) < ($1.deadlineMS!, $1.seq) }.prefix(limit).map(\.seq)
        let given = Set(due)
        let expired = kept.outbox.filter { given.contains($0.seq) }
            .map { StoredOutboxEntry(seq: $0.seq, bytes: $0.payload.readableBytes, deadlineMS: $0.deadlineMS) }
        kept.outbox.removeAll { given.contains($0.seq) }
        kept.index.givenUp += UInt64(expired.count)
        stored -= expired.count
        sessions[session] = kept
        let next = kept.outbox.filter { $0.seq > seq }.compactMap(\.deadlineMS).min()
        return loop.makeSucceededFuture(ExpiredOutboundBatch(messages: expired, nextDeadlineMS: next))
    }

    func outboundSpan(session: UInt64, after seq: UInt64, count: Int) -> EventLoopFuture<StoredOutboxSpan> {
        let span = (sessions[session]?.outbox ?? []).lazy.filter { $0.seq > seq }.prefix(count)
        return loop.makeSucceededFuture(StoredOutboxSpan(count: span.count, lastSeq: span.last?.seq ?? seq,
                                                         bytes: span.reduce(0) { $0 + $1.payload.readableBytes }))
    }

    func readInbound(session: UInt64, after seq: UInt64, limit: Int, maxBytes: Int)
        -> EventLoopFuture<[(seq: UInt64, payload: ByteBuffer)]>
    {
        loop.makeSucceededFuture(Self.range(sessions[session]?.inbox ?? [], after: seq, limit: limit, maxBytes: maxBytes))
    }

    private static func range(_ queue: [(seq: UInt64, payload: ByteBuffer)], after seq: UInt64, limit: Int, maxBytes: Int)
        -> [(seq: UInt64, payload: ByteBuffer)]
    {
        var result: [(seq: UInt64, payload: ByteBuffer)] = []
        var bytes = 0
        for message in queue where message.seq > seq {
            guard result.count < limit, result.isEmpty || bytes + message.payload.readableBytes <= maxBytes else { break }
            bytes += message.payload.readableBytes
            result.append(message)
        }
        return result
    }

    func deliverOutcomes(to receiver: @escaping ([PersistOutcome]) -> Void) {
        self.receiver = receiver
    }

    func submit(_ operation: PersistOperation, tag: UInt64) {
        guard let receiver else { preconditionFailure("submit before deliverOutcomes(to:)") }
        receiver([PersistOutcome(tag: tag, result: apply(operation))])
    }

    private func apply(_ operation: PersistOperation) -> Result<Void, SessionPersistenceError> {
        switch operation {
        case .create(let record):
            guard sessions[record.id] == nil, !closed.contains(record.id) else {
                return .failure(.failed("session \(record.id) exists already"))
            }
            sessions[record.id] = Kept(index: StoredSession(record: record, ackedSeq: 0, deliveredSeq: 0, outbox: [], sentSeq: 0, receivedSeq: 0))
            return .success(())
        case .appendOutbound(let session, let seq, let payload, let expiresAtMS):
            return change(session) { kept in
                guard seq == kept.index.sentSeq + 1 else { throw SessionPersistenceError.failed("outbound seq \(seq) after \(kept.index.sentSeq)") }
                kept.outbox.append(StoredOutboundMessage(seq: seq, payload: payload, deadlineMS: expiresAtMS))
                kept.index.sentSeq = seq
                return 1
            }
        case .giveUpOutbound(let session, let seq):
            return change(session) { kept in
                guard let index = kept.outbox.firstIndex(where: { $0.seq == seq }) else { return 0 }
                kept.outbox.remove(at: index)
                kept.index.givenUp += 1
                return -1
            }
        case .markAcked(let session, let seq):
            return change(session) { kept in
                guard seq > kept.index.ackedSeq else { return 0 }
                let before = kept.outbox.count
                kept.outbox.removeAll { $0.seq <= seq }
                kept.index.ackedSeq = seq
                return kept.outbox.count - before
            }
        case .appendInbound(let session, let seq, let payload):
            return change(session) { kept in
                guard seq == kept.index.receivedSeq + 1 else { throw SessionPersistenceError.failed("inbound seq \(seq) after \(kept.index.receivedSeq)") }
                kept.inbox.append((seq, payload))
                kept.index.receivedSeq = seq
                return 1
            }
        case .markDelivered(let session, let seq):
            return change(session) { kept in
                guard seq > kept.index.deliveredSeq else { return 0 }
                let before = kept.inbox.count
                kept.inbox.removeAll { $0.seq <= seq }
                kept.index.deliveredSeq = seq
                return kept.inbox.count - before
            }
        case .close(let session):
            if let gone = sessions.removeValue(forKey: session) {
                stored -= gone.outbox.count + gone.inbox.count
            }
            closed.insert(session)
            return .success(())
        }
    }

    /// Applies `body` (which returns the change in stored messages) to one session.
    private func change(_ id: UInt64, _ body: (inout Kept) throws -> Int) -> Result<Void, SessionPersistenceError> {
        guard var session = sessions[id] else { return .failure(.failed("no session \(id)")) }
        do {
            let delta = try body(&session)
            if delta > 0, stored + delta > capacity { return .failure(.full) }
            stored += delta
            sessions[id] = session
            return .success(())
        } catch {
            return .failure(error as? SessionPersistenceError ?? .failed("\(error)"))
        }
    }
}
