import AgentIPC
import AgentStore
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
    /// Why an operation fails without being applied (a disk that refuses it), or nil to apply it.
    var refusing: ((StoreOperation) -> SessionPersistenceError?)?
    /// A session as kept here: counters and both queues with their payloads.
    private struct Kept {
        var record: SessionRecord
        var outbox: [OutboundMessage] = []
        var inbox: [InboundMessage] = []

        /// The session as the store's index describes it now.
        var indexed: IndexedSession {
            IndexedSession(record: record, outboxCount: outbox.count, outboxBytes: outbox.reduce(0) { $0 + $1.payload.readableBytes },
                           outboxEarliestExpiryMS: outbox.compactMap(\.expiresAtMS).min(),
                           inboxBytes: inbox.reduce(0) { $0 + $1.payload.readableBytes })
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

    func load() -> EventLoopFuture<StoreIndex> {
        let open = sessions.values.map(\.indexed)
        return loop.makeSucceededFuture(StoreIndex(sessions: (open + closed.map(IndexedSession.closed)).sorted { $0.record.id < $1.record.id }))
    }

    private func readOutbound(session: UInt64, after seq: UInt64, limit: Int, maxBytes: Int) -> [OutboundMessage] {
        Self.range(sessions[session]?.outbox ?? [], after: seq, limit: limit, maxBytes: maxBytes)
    }

    private func giveUpExpiredOutbound(session: UInt64, after seq: UInt64, nowMS: Int64, limit: Int)
        -> Result<ExpiredOutbound, SessionPersistenceError>
    {
        guard var kept = sessions[session] else { return .failure(.failed("no session \(session)")) }
        let due = kept.outbox.filter { $0.seq > seq && ($0.expiresAtMS ?? .max) <= nowMS }
            .sorted { ($0.expiresAtMS!, $0.seq) < ($1.expiresAtMS!, $1.seq) }.prefix(limit).map(\.seq)
        let given = Set(due)
        let expired = kept.outbox.filter { given.contains($0.seq) }
            .map { OutboundIndexEntry(seq: $0.seq, bytes: $0.payload.readableBytes, expiresAtMS: $0.expiresAtMS) }
        kept.outbox.removeAll { given.contains($0.seq) }
        kept.record.givenUp += UInt64(expired.count)
        stored -= expired.count
        sessions[session] = kept
        let next = kept.outbox.filter { $0.seq > seq }.compactMap(\.expiresAtMS).min()
        return .success(ExpiredOutbound(messages: expired, nextExpiryMS: next))
    }

    private func outboundSpan(session: UInt64, after seq: UInt64, count: Int) -> OutboundSpan {
        let span = (sessions[session]?.outbox ?? []).lazy.filter { $0.seq > seq }.prefix(count)
        return OutboundSpan(count: span.count, lastSeq: span.last?.seq ?? seq, bytes: span.reduce(0) { $0 + $1.payload.readableBytes })
    }

    private static func range<Message: StoredPayload>(_ queue: [Message], after seq: UInt64, limit: Int, maxBytes: Int) -> [Message] {
        var result: [Message] = []
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

    func submit(_ operation: StoreOperation, tag: UInt64) {
        guard let receiver else { preconditionFailure("submit before deliverOutcomes(to:)") }
        if let refusal = refusing?(operation) {
            receiver([PersistOutcome(tag: tag, result: .failure(refusal))])
            return
        }
        receiver([PersistOutcome(tag: tag, result: apply(operation))])
    }

    private func apply(_ operation: StoreOperation) -> Result<StoreResult, SessionPersistenceError> {
        switch operation {
        case .outbound(let session, let after, let limit, let maxBytes):
            return .success(.outbound(readOutbound(session: session, after: after, limit: limit, maxBytes: maxBytes)))
        case .inbound(let session, let after, let limit, let maxBytes):
            return .success(.inbound(Self.range(sessions[session]?.inbox ?? [], after: after, limit: limit, maxBytes: maxBytes)))
        case .giveUpExpiredOutbound(let session, let after, let nowMS, let limit):
            return giveUpExpiredOutbound(session: session, after: after, nowMS: nowMS, limit: limit).map { .expiredOutbound($0) }
        case .outboundSpan(let session, let after, let count):
            return .success(.outboundSpan(outboundSpan(session: session, after: after, count: count)))
        default:
            return write(operation).map { .done }
        }
    }

    private func write(_ operation: StoreOperation) -> Result<Void, SessionPersistenceError> {
        switch operation {
        case .createSession(let id?, let service, let ownerUID, let priority, let durable, _):
            guard sessions[id] == nil, !closed.contains(id) else {
                return .failure(.failed("session \(id) exists already"))
            }
            sessions[id] = Kept(record: SessionRecord(id: id, service: service, ownerUID: ownerUID, priority: priority, durable: durable,
                                                      createdMS: 0))
            return .success(())
        case .appendOutbound(let session, let seq, let payload, let expiresAtMS, _):
            return change(session) { kept in
                guard seq == kept.record.sentSeq + 1 else { throw SessionPersistenceError.failed("outbound seq \(seq) after \(kept.record.sentSeq)") }
                kept.outbox.append(OutboundMessage(seq: seq, payload: payload, expiresAtMS: expiresAtMS))
                kept.record.sentSeq = seq
                return 1
            }
        case .giveUpOutbound(let session, let seq):
            return change(session) { kept in
                guard let index = kept.outbox.firstIndex(where: { $0.seq == seq }) else { return 0 }
                kept.outbox.remove(at: index)
                kept.record.givenUp += 1
                return -1
            }
        case .markAcked(let session, let seq):
            return change(session) { kept in
                guard seq > kept.record.ackedSeq else { return 0 }
                let before = kept.outbox.count
                kept.outbox.removeAll { $0.seq <= seq }
                kept.record.ackedSeq = seq
                return kept.outbox.count - before
            }
        case .appendInbound(let session, let seq, let payload, _):
            return change(session) { kept in
                guard seq == kept.record.receivedSeq + 1 else { throw SessionPersistenceError.failed("inbound seq \(seq) after \(kept.record.receivedSeq)") }
                kept.inbox.append(InboundMessage(seq: seq, payload: payload))
                kept.record.receivedSeq = seq
                return 1
            }
        case .markDelivered(let session, let seq):
            return change(session) { kept in
                guard seq > kept.record.deliveredSeq else { return 0 }
                let before = kept.inbox.count
                kept.inbox.removeAll { $0.seq <= seq }
                kept.record.deliveredSeq = seq
                return kept.inbox.count - before
            }
        case .closeSession(let session):
            if let gone = sessions.removeValue(forKey: session) {
                stored -= gone.outbox.count + gone.inbox.count
            }
            closed.insert(session)
            return .success(())
        default:
            return .failure(.failed("the session layer does not use \(operation)"))
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

/// A stored message of either direction, for `range`.
protocol StoredPayload {
    var seq: UInt64 { get }
    var payload: ByteBuffer { get }
}

extension OutboundMessage: StoredPayload {}
extension InboundMessage: StoredPayload {}

extension IndexedSession {
    /// An open session as the store indexes it, its outbox described message by message.
    static func restored(_ id: UInt64, service: String = "echo", owner: UInt32 = 1000, ackedSeq: UInt64, deliveredSeq: UInt64,
                         outbox: [OutboundIndexEntry], sentSeq: UInt64, receivedSeq: UInt64, givenUp: UInt64 = 0) -> IndexedSession {
        var record = SessionRecord(id: id, service: service, ownerUID: owner, priority: IPCPriority.normal.rawValue, durable: true,
                                   sentSeq: sentSeq, ackedSeq: ackedSeq, receivedSeq: receivedSeq, deliveredSeq: deliveredSeq, createdMS: 0)
        record.givenUp = givenUp
        return IndexedSession(record: record, outboxCount: outbox.count, outboxBytes: outbox.reduce(0) { $0 + $1.bytes },
                              outboxEarliestExpiryMS: outbox.compactMap(\.expiresAtMS).min())
    }

    /// A closed session: its id stays reserved.
    static func closed(_ id: UInt64) -> IndexedSession {
        IndexedSession(record: SessionRecord(id: id, service: "echo", ownerUID: 0, priority: 1, durable: true, state: .closed, createdMS: 0))
    }
}
