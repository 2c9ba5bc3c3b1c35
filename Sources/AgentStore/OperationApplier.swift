import NIOCore
import SQLiteDatabase

/// Turns each `StoreOperation` into SQL on the writer's connection, inside a
/// transaction the caller (`StoreWriter`) opened.
///
/// Every statement is prepared once and reused: at thousands of operations per
/// commit, parsing SQL would cost more than running it. Checks against the
/// session's counters come before any write, so a caller's mistake (a duplicate
/// seq, an unknown session) is reported with the numbers that explain it.
///
/// A session's counters are read from its row once and then kept in memory
/// (`cache`); the four sequence counters are written back once per session and
/// transaction, just before COMMIT (`writeCounters`), not once per message. An
/// append is therefore one INSERT. Every change to the cache is recorded
/// (`transactionUndo`, and `submissionUndo` inside a savepoint), so a rollback
/// puts the cache back exactly as the database goes back. Invariants: a session
/// whose counters are not yet written back is in the cache; every other
/// session's row is up to date, so reading it (a cache miss) gives the truth.
/// An operation changes the cache only after its statements succeeded, so an
/// operation that throws leaves the cache as it was.
///
/// A payload of at least `largePayloadBytes` goes to a segment file (`PayloadSegments`) and
/// its row keeps an empty `payload` with the segment, offset, length and CRC; every read
/// of a payload or its length goes through `payload(_:)`/`bytesColumn`, so both kinds of
/// row read alike.
///
/// Not `Sendable`: it lives on the writer thread only.
final class OperationApplier {
    let database: SQLiteDatabase
    let segments: PayloadSegments
    /// Payloads of this many bytes or more go to a segment file.
    let largePayloadBytes: Int
    /// The most bytes the segment files may hold in the open transaction (nil: no cap); set by the writer.
    var segmentLimit: Int?
    /// Rows were deleted since the writer last looked: a segment may have lost its last row.
    var deletedRows = false
    private var allocator: SessionIDAllocator
    private let bufferAllocator: ByteBufferAllocator = ByteBufferAllocator()

    /// Counters of the sessions used since they were last evicted (see the type's comment).
    private var cache: [UInt64: Counters] = [:]
    /// The cache entries changed in the open transaction, with their values before it (nil: not cached).
    private var transactionUndo: [UInt64: Counters?] = [:]
    /// Sessions whose sequence counters changed in the open transaction: written back before COMMIT.
    private var dirty: Set<UInt64> = []
    /// Inside a submission's savepoint: the cache changes it made, oldest first, to undo on rollback.
    private var submissionUndo: [(UInt64, Counters?)]?

    private let selectCounters: SQLiteStatement
    private let selectSessionExists: SQLiteStatement
    private let selectSession: SQLiteStatement
    private let selectAllSessions: SQLiteStatement
    private let selectAllGivenUp: SQLiteStatement
    private let deleteOutboxOne: SQLiteStatement
    private let updateGivenUp: SQLiteStatement
    private let insertSession: SQLiteStatement
    private let insertOutbox: SQLiteStatement
    private let updateSeqs: SQLiteStatement
    private let deleteOutboxUpTo: SQLiteStatement
    private let insertInbox: SQLiteStatement
    private let deleteInboxUpTo: SQLiteStatement
    private let updateFailed: SQLiteStatement
    private let updateClosed: SQLiteStatement
    private let pruneClosed: SQLiteStatement
    /// Sessions closed since the rows of old closed sessions were last pruned.
    private var closedSincePrune = 0
    private let deleteOutboxOfSession: SQLiteStatement
    private let deleteInboxOfSession: SQLiteStatement
    private let selectOutboxAfter: SQLiteStatement
    private let selectInboxAfter: SQLiteStatement
    private let selectAllOutbox: SQLiteStatement
    private let selectAllInbox: SQLiteStatement
    private let selectOutboxTotals: SQLiteStatement
    private let selectSessionExpired: SQLiteStatement
    private let selectSessionNextExpiry: SQLiteStatement
    private let selectOutboxSpan: SQLiteStatement
    private let selectInboxBytes: SQLiteStatement
    private let selectOutboxSegmentUsed: SQLiteStatement
    private let selectInboxSegmentUsed: SQLiteStatement

    /// A payload's length whether it is inline or in a segment.
    private static let bytesColumn = "ifnull(payload_bytes, length(payload))"
    /// The columns `payload(_:at:)` reads, from `at` on.
    private static let payloadColumns = "payload, segment, segment_offset, payload_bytes, payload_crc"

    private static let sessionColumns =
        "id, service, owner_uid, priority, durable, state, failure_code, sent_seq, acked_seq, received_seq, delivered_seq, created_ms"

    init(database: SQLiteDatabase, configuration: StoreConfiguration,
         allocator: SessionIDAllocator = SessionIDAllocator()) throws {
        self.database = database
        self.allocator = allocator
        largePayloadBytes = configuration.largePayloadBytes
        let outboxUses = try database.prepare("SELECT 1 FROM outbox WHERE segment = ? LIMIT 1")
        let inboxUses = try database.prepare("SELECT 1 FROM inbox WHERE segment = ? LIMIT 1")
        selectOutboxSegmentUsed = outboxUses
        selectInboxSegmentUsed = inboxUses
        segments = try PayloadSegments(databasePath: configuration.path, durability: configuration.durability,
                                       segmentBytes: configuration.segmentFileBytes) { segment in
            try Self.isUsed(segment, outbox: outboxUses, inbox: inboxUses)
        }
        selectCounters = try database.prepare(
            "SELECT state, sent_seq, acked_seq, received_seq, delivered_seq FROM sessions WHERE id = ?")
        selectSessionExists = try database.prepare("SELECT 1 FROM sessions WHERE id = ?")
        selectSession = try database.prepare("SELECT \(Self.sessionColumns) FROM sessions WHERE id = ?")
        selectAllSessions = try database.prepare("SELECT \(Self.sessionColumns) FROM sessions ORDER BY id")
        selectAllGivenUp = try database.prepare("SELECT id, given_up FROM sessions WHERE given_up > 0")
        deleteOutboxOne = try database.prepare("DELETE FROM outbox WHERE session = ? AND seq = ?")
        updateGivenUp = try database.prepare("UPDATE sessions SET given_up = given_up + ? WHERE id = ?")
        insertSession = try database.prepare(
            "INSERT INTO sessions(\(Self.sessionColumns)) VALUES(?, ?, ?, ?, ?, 'open', NULL, 0, 0, 0, 0, ?)")
        insertOutbox = try database.prepare("""
            INSERT INTO outbox(session, seq, payload, expires_ms, segment, segment_offset, payload_bytes, payload_crc)
            VALUES(?, ?, ?, ?, ?, ?, ?, ?)
            """)
        updateSeqs = try database.prepare(
            "UPDATE sessions SET sent_seq = ?, acked_seq = ?, received_seq = ?, delivered_seq = ? WHERE id = ?")
        deleteOutboxUpTo = try database.prepare("DELETE FROM outbox WHERE session = ? AND seq <= ?")
        insertInbox = try database.prepare("""
            INSERT INTO inbox(session, seq, payload, segment, segment_offset, payload_bytes, payload_crc)
            VALUES(?, ?, ?, ?, ?, ?, ?)
            """)
        deleteInboxUpTo = try database.prepare("DELETE FROM inbox WHERE session = ? AND seq <= ?")
        updateFailed = try database.prepare("UPDATE sessions SET state = 'failed', failure_code = ? WHERE id = ?")
        updateClosed = try database.prepare("UPDATE sessions SET state = 'closed' WHERE id = ?")
        pruneClosed = try database.prepare("""
            DELETE FROM sessions WHERE id IN
                (SELECT id FROM sessions WHERE state = 'closed' ORDER BY created_ms DESC, id LIMIT -1 OFFSET ?)
            """)
        deleteOutboxOfSession = try database.prepare("DELETE FROM outbox WHERE session = ?")
        deleteInboxOfSession = try database.prepare("DELETE FROM inbox WHERE session = ?")
        selectOutboxAfter = try database.prepare(
            "SELECT seq, expires_ms, \(Self.bytesColumn), \(Self.payloadColumns) FROM outbox WHERE session = ? AND seq > ? ORDER BY seq LIMIT ?")
        selectInboxAfter = try database.prepare(
            "SELECT seq, \(Self.bytesColumn), \(Self.payloadColumns) FROM inbox WHERE session = ? AND seq > ? ORDER BY seq LIMIT ?")
        selectAllOutbox = try database.prepare(
            "SELECT session, seq, expires_ms, \(Self.payloadColumns) FROM outbox ORDER BY session, seq")
        selectAllInbox = try database.prepare("SELECT session, seq, \(Self.payloadColumns) FROM inbox ORDER BY session, seq")
        // length() of a BLOB reads its size from the record header, not its (overflow) pages.
        selectOutboxTotals = try database.prepare(
            "SELECT session, count(*), sum(\(Self.bytesColumn)), min(expires_ms) FROM outbox GROUP BY session")
        // INDEXED BY: the primary key would serve `seq > ?` too, by a scan of the whole queue.
        selectSessionExpired = try database.prepare("""
            SELECT seq, \(Self.bytesColumn), expires_ms FROM outbox INDEXED BY outbox_session_expiry
            WHERE session = ? AND expires_ms IS NOT NULL AND expires_ms <= ? AND seq > ? ORDER BY expires_ms LIMIT ?
            """)
        selectSessionNextExpiry = try database.prepare("""
            SELECT expires_ms FROM outbox INDEXED BY outbox_session_expiry
            WHERE session = ? AND expires_ms IS NOT NULL AND seq > ? ORDER BY expires_ms LIMIT 1
            """)
        selectOutboxSpan = try database.prepare(
            "SELECT seq, \(Self.bytesColumn) FROM outbox WHERE session = ? AND seq > ? ORDER BY seq LIMIT ?")
        selectInboxBytes = try database.prepare("SELECT session, sum(\(Self.bytesColumn)) FROM inbox GROUP BY session")
    }

    /// Applies one operation inside the open transaction.
    ///
    /// Throws `StoreError` for a caller's mistake (nothing was written by this
    /// operation) and `SQLiteError` for a failure of the database itself.
    func apply(_ operation: StoreOperation) throws -> StoreResult {
        switch operation {
        case .createSession(let id, let service, let ownerUID, let priority, let durable, let createdAtMS):
            return .session(try createSession(id: id, service: service, ownerUID: ownerUID, priority: priority,
                                              durable: durable, createdAtMS: createdAtMS))
        case .appendOutbound(let session, let seq, let payload, let expiresAtMS, let payloadCRC):
            try appendOutbound(session: session, seq: seq, payload: payload, expiresAtMS: expiresAtMS, payloadCRC: payloadCRC)
            return .done
        case .markAcked(let session, let upTo):
            try markAcked(session: session, upTo: upTo)
            return .done
        case .appendInbound(let session, let seq, let payload, let payloadCRC):
            try appendInbound(session: session, seq: seq, payload: payload, payloadCRC: payloadCRC)
            return .done
        case .markDelivered(let session, let upTo):
            try markDelivered(session: session, upTo: upTo)
            return .done
        case .failSession(let session, let code):
            try failSession(session, code: code)
            return .done
        case .closeSession(let session):
            try closeSession(session)
            return .done
        case .giveUpOutbound(let session, let seq):
            _ = try counters(session)
            let id = SQLiteValue.integer(Int64(bitPattern: session))
            try deleteOutboxOne.run([id, .integer(Int64(bitPattern: seq))])
            deletedRows = true
            // Only a message still stored counts: giving one up twice changes nothing.
            try updateGivenUp.run([.integer(Int64(database.changes)), id])
            return .done
        case .giveUpExpiredOutbound(let session, let after, let nowMS, let limit):
            return .expiredOutbound(try giveUpExpiredOutbound(session: session, after: after, nowMS: nowMS, limit: limit))
        case .outboundSpan(let session, let after, let count):
            return .outboundSpan(try outboundSpan(session: session, after: after, count: count))
        case .session(let id):
            try writeCounters()
            return .sessionRecord(try sessionRecord(id))
        case .outbound(let session, let after, let limit, let maxBytes):
            return .outbound(try outbound(session: session, after: after, limit: limit, maxBytes: maxBytes))
        case .inbound(let session, let after, let limit, let maxBytes):
            return .inbound(try inbound(session: session, after: after, limit: limit, maxBytes: maxBytes))
        case .load:
            try writeCounters()
            return .snapshot(try load())
        case .loadIndex:
            try writeCounters()
            return .index(try loadIndex())
        }
    }

    // MARK: Transactions (called by StoreWriter)

    /// A submission of several operations starts, inside its savepoint.
    func beginSubmission() {
        submissionUndo = []
    }

    /// The submission's savepoint was released (`keep`) or rolled back.
    func endSubmission(keep: Bool) {
        if !keep, let undo = submissionUndo {
            for (id, previous) in undo.reversed() { cache[id] = previous }
        }
        submissionUndo = nil
    }

    /// Writes the changed sequence counters to their rows; before COMMIT, and before
    /// anything reads them from the table. They stay dirty until the commit: a rolled
    /// back savepoint may undo this write, and COMMIT then writes them again.
    func writeCounters() throws(SQLiteError) {
        for id in dirty {
            guard let counters = cache[id] else { continue }  // created and rolled back
            try updateSeqs.run([.integer(Int64(bitPattern: counters.sent)), .integer(Int64(bitPattern: counters.acked)),
                                .integer(Int64(bitPattern: counters.received)), .integer(Int64(bitPattern: counters.delivered)),
                                .integer(Int64(bitPattern: id))])
        }
    }

    /// The transaction committed: the cache is the truth. Closed sessions leave the
    /// cache (their rows are up to date), so it holds only sessions in use.
    func transactionCommitted() {
        for id in transactionUndo.keys where cache[id]?.state == .closed { cache[id] = nil }
        transactionUndo.removeAll(keepingCapacity: true)
        dirty.removeAll(keepingCapacity: true)
    }

    /// The transaction was rolled back: so is the cache.
    func transactionRolledBack() {
        for (id, previous) in transactionUndo { cache[id] = previous }
        transactionUndo.removeAll(keepingCapacity: true)
        dirty.removeAll(keepingCapacity: true)
        submissionUndo = nil
    }

    /// Every change to the cache goes through here, so it can be undone.
    private func setCounters(_ id: UInt64, _ counters: Counters, seqsChanged: Bool) {
        let previous = cache[id]
        if transactionUndo.index(forKey: id) == nil { transactionUndo[id] = .some(previous) }
        submissionUndo?.append((id, previous))
        cache[id] = counters
        if seqsChanged { dirty.insert(id) }
    }

    // MARK: Sessions

    private struct Counters {
        var state: StoredSessionState
        var sent: UInt64
        var acked: UInt64
        var received: UInt64
        var delivered: UInt64
    }

    private func counters(_ session: UInt64) throws -> Counters {
        if let cached = cache[session] { return cached }
        defer { selectCounters.reset() }
        try selectCounters.bind(Int64(bitPattern: session), at: 1)
        guard try selectCounters.step() else { throw StoreError.unknownSession(session) }
        let counters = Counters(state: try Self.state(selectCounters.text(at: 0)),
                                sent: UInt64(bitPattern: selectCounters.integer(at: 1)),
                                acked: UInt64(bitPattern: selectCounters.integer(at: 2)),
                                received: UInt64(bitPattern: selectCounters.integer(at: 3)),
                                delivered: UInt64(bitPattern: selectCounters.integer(at: 4)))
        // Recorded like a change: the row may be one this transaction created and may roll back.
        setCounters(session, counters, seqsChanged: false)
        return counters
    }

    private func sessionExists(_ id: UInt64) throws(SQLiteError) -> Bool {
        defer { selectSessionExists.reset() }
        try selectSessionExists.bind(Int64(bitPattern: id), at: 1)
        return try selectSessionExists.step()
    }

    private func createSession(id: UInt64?, service: String, ownerUID: UInt32, priority: UInt8, durable: Bool,
                               createdAtMS: Int64) throws -> SessionRecord {
        let chosen: UInt64
        if let id, id != 0 {
            guard try !sessionExists(id) else { throw StoreError.sessionExists(id) }
            chosen = id
        } else {
            chosen = try allocator.draw(isUsed: sessionExists)
        }
        try insertSession.run([.integer(Int64(bitPattern: chosen)), .text(service), .integer(Int64(ownerUID)),
                               .integer(Int64(priority)), .integer(durable ? 1 : 0), .integer(createdAtMS)])
        allocator.stored(chosen)
        return SessionRecord(id: chosen, service: service, ownerUID: ownerUID, priority: priority, durable: durable,
                             createdMS: createdAtMS)
    }

    private func failSession(_ session: UInt64, code: UInt16?) throws {
        let current = try counters(session)
        // CLOSE is final: a late OPEN_FAIL for a session the owner already closed changes nothing.
        guard current.state != .closed else { return }
        try updateFailed.run([code.map { .integer(Int64($0)) } ?? .null, .integer(Int64(bitPattern: session))])
        var changed = current
        changed.state = .failed
        setCounters(session, changed, seqsChanged: false)
    }

    private func closeSession(_ session: UInt64) throws {
        var changed = try counters(session)
        let id = SQLiteValue.integer(Int64(bitPattern: session))
        try deleteOutboxOfSession.run([id])
        try deleteInboxOfSession.run([id])
        deletedRows = true
        try updateClosed.run([id])
        changed.state = .closed
        setCounters(session, changed, seqsChanged: false)
        try pruneClosedRowsNowAndThen()
    }

    /// Rows of closed sessions are kept only to refuse their ids: the newest
    /// `StoreLimits.closedSessionsKept` stay; older ones are deleted once per
    /// `closedSessionsPruneEvery` closes, so an OPEN/CLOSE loop cannot grow the file.
    private func pruneClosedRowsNowAndThen() throws {
        closedSincePrune += 1
        guard closedSincePrune >= StoreLimits.closedSessionsPruneEvery else { return }
        closedSincePrune = 0
        try pruneClosed.run([.integer(Int64(StoreLimits.closedSessionsKept))])
    }

    private func sessionRecord(_ id: UInt64) throws -> SessionRecord? {
        defer { selectSession.reset() }
        try selectSession.bind(Int64(bitPattern: id), at: 1)
        return try selectSession.step() ? try Self.record(from: selectSession) : nil
    }

    // MARK: Outbound

    private func appendOutbound(session: UInt64, seq: UInt64, payload: ByteBuffer, expiresAtMS: Int64?, payloadCRC: UInt32?) throws {
        let current = try counters(session)
        guard current.state == .open else { throw StoreError.sessionNotOpen(session, current.state) }
        try Self.checkNext(seq, after: current.sent, session: session, direction: .outbound)
        defer { insertOutbox.reset() }
        try insertOutbox.bind(Int64(bitPattern: session), at: 1)
        try insertOutbox.bind(Int64(bitPattern: seq), at: 2)
        if let expiresAtMS { try insertOutbox.bind(expiresAtMS, at: 4) }
        try bindPayload(payload, crc: payloadCRC, to: insertOutbox, at: 3, reference: 5)
        try insertOutbox.step()
        var changed = current
        changed.sent = seq
        setCounters(session, changed, seqsChanged: true)
    }

    private func markAcked(session: UInt64, upTo: UInt64) throws {
        let current = try counters(session)
        guard upTo <= current.sent else {
            throw StoreError.ackBeyondStored(session: session, seq: upTo, highest: current.sent, direction: .outbound)
        }
        // ACKs are cumulative and may repeat (wire.md §5): an old one changes nothing.
        guard upTo > current.acked else { return }
        try deleteOutboxUpTo.run([.integer(Int64(bitPattern: session)), .integer(Int64(bitPattern: upTo))])
        deletedRows = true
        var changed = current
        changed.acked = upTo
        setCounters(session, changed, seqsChanged: true)
    }

    private func giveUpExpiredOutbound(session: UInt64, after: UInt64, nowMS: Int64, limit: Int) throws -> ExpiredOutbound {
        _ = try counters(session)
        let id = SQLiteValue.integer(Int64(bitPattern: session))
        var expired: [OutboundIndexEntry] = []
        do {
            defer { selectSessionExpired.reset() }
            try selectSessionExpired.bind([id, .integer(nowMS), .integer(Int64(bitPattern: after)), .integer(Int64(limit))])
            while try selectSessionExpired.step() {
                expired.append(OutboundIndexEntry(seq: UInt64(bitPattern: selectSessionExpired.integer(at: 0)),
                                                  bytes: Int(selectSessionExpired.integer(at: 1)),
                                                  expiresAtMS: selectSessionExpired.integer(at: 2)))
            }
        }
        for message in expired { try deleteOutboxOne.run([id, .integer(Int64(bitPattern: message.seq))]) }
        if !expired.isEmpty { deletedRows = true }
        if !expired.isEmpty { try updateGivenUp.run([.integer(Int64(expired.count)), id]) }
        // EXPIRED events go out in seq order.
        expired.sort { $0.seq < $1.seq }
        defer { selectSessionNextExpiry.reset() }
        try selectSessionNextExpiry.bind([id, .integer(Int64(bitPattern: after))])
        let next = try selectSessionNextExpiry.step() ? selectSessionNextExpiry.integer(at: 0) : nil
        return ExpiredOutbound(messages: expired, nextExpiryMS: next)
    }

    private func outboundSpan(session: UInt64, after: UInt64, count: Int) throws(SQLiteError) -> OutboundSpan {
        defer { selectOutboxSpan.reset() }
        try selectOutboxSpan.bind([.integer(Int64(bitPattern: session)), .integer(Int64(bitPattern: after)), .integer(Int64(count))])
        var span = OutboundSpan(count: 0, lastSeq: after, bytes: 0)
        while try selectOutboxSpan.step() {
            span.count += 1
            span.lastSeq = UInt64(bitPattern: selectOutboxSpan.integer(at: 0))
            span.bytes += Int(selectOutboxSpan.integer(at: 1))
        }
        return span
    }

    private func outbound(session: UInt64, after: UInt64, limit: Int, maxBytes: Int) throws -> [OutboundMessage] {
        defer { selectOutboxAfter.reset() }
        try selectOutboxAfter.bind([.integer(Int64(bitPattern: session)), .integer(Int64(bitPattern: after)),
                                    .integer(Int64(limit))])
        var messages: [OutboundMessage] = []
        var bytes = 0
        while bytes < maxBytes, try selectOutboxAfter.step() {
            let length = Int(selectOutboxAfter.integer(at: 2))
            guard messages.isEmpty || bytes + length <= maxBytes else { break }
            bytes += length
            messages.append(OutboundMessage(seq: UInt64(bitPattern: selectOutboxAfter.integer(at: 0)),
                                            payload: try payload(selectOutboxAfter, at: 3),
                                            expiresAtMS: selectOutboxAfter.isNull(at: 1) ? nil : selectOutboxAfter.integer(at: 1),
                                            payloadCRC: Self.segmentCRC(selectOutboxAfter, at: 3)))
        }
        return messages
    }

    // MARK: Inbound

    private func appendInbound(session: UInt64, seq: UInt64, payload: ByteBuffer, payloadCRC: UInt32?) throws {
        let current = try counters(session)
        guard current.state == .open else { throw StoreError.sessionNotOpen(session, current.state) }
        try Self.checkNext(seq, after: current.received, session: session, direction: .inbound)
        defer { insertInbox.reset() }
        try insertInbox.bind(Int64(bitPattern: session), at: 1)
        try insertInbox.bind(Int64(bitPattern: seq), at: 2)
        try bindPayload(payload, crc: payloadCRC, to: insertInbox, at: 3, reference: 4)
        try insertInbox.step()
        var changed = current
        changed.received = seq
        setCounters(session, changed, seqsChanged: true)
    }

    private func markDelivered(session: UInt64, upTo: UInt64) throws {
        let current = try counters(session)
        guard upTo <= current.received else {
            throw StoreError.ackBeyondStored(session: session, seq: upTo, highest: current.received, direction: .inbound)
        }
        guard upTo > current.delivered else { return }
        try deleteInboxUpTo.run([.integer(Int64(bitPattern: session)), .integer(Int64(bitPattern: upTo))])
        deletedRows = true
        var changed = current
        changed.delivered = upTo
        setCounters(session, changed, seqsChanged: true)
    }

    private func inbound(session: UInt64, after: UInt64, limit: Int, maxBytes: Int) throws -> [InboundMessage] {
        defer { selectInboxAfter.reset() }
        try selectInboxAfter.bind([.integer(Int64(bitPattern: session)), .integer(Int64(bitPattern: after)),
                                   .integer(Int64(limit))])
        var messages: [InboundMessage] = []
        var bytes = 0
        while bytes < maxBytes, try selectInboxAfter.step() {
            let length = Int(selectInboxAfter.integer(at: 1))
            guard messages.isEmpty || bytes + length <= maxBytes else { break }
            bytes += length
            messages.append(InboundMessage(seq: UInt64(bitPattern: selectInboxAfter.integer(at: 0)),
                                           payload: try payload(selectInboxAfter, at: 2)))
        }
        return messages
    }

    // MARK: Start-up

    /// Every session's record with its given-up count, and each id's index in that list:
    /// what both start-up reads begin with.
    private func loadRecords() throws -> (records: [SessionRecord], position: [UInt64: Int]) {
        var records: [SessionRecord] = []
        var position: [UInt64: Int] = [:]
        do {
            defer { selectAllSessions.reset() }
            while try selectAllSessions.step() {
                let record = try Self.record(from: selectAllSessions)
                position[record.id] = records.count
                records.append(record)
            }
        }
        do {
            defer { selectAllGivenUp.reset() }
            while try selectAllGivenUp.step() {
                guard let index = position[UInt64(bitPattern: selectAllGivenUp.integer(at: 0))] else { continue }
                records[index].givenUp = UInt64(bitPattern: selectAllGivenUp.integer(at: 1))
            }
        }
        return (records, position)
    }

    private func load() throws -> StoreSnapshot {
        let (records, position) = try loadRecords()
        var sessions = records.map { StoredSession(record: $0) }
        do {
            defer { selectAllOutbox.reset() }
            while try selectAllOutbox.step() {
                // A row of a session that does not exist cannot be written by this
                // store; skip it rather than refuse to start.
                guard let index = position[UInt64(bitPattern: selectAllOutbox.integer(at: 0))] else { continue }
                sessions[index].outbox.append(OutboundMessage(
                    seq: UInt64(bitPattern: selectAllOutbox.integer(at: 1)),
                    payload: try payload(selectAllOutbox, at: 3),
                    expiresAtMS: selectAllOutbox.isNull(at: 2) ? nil : selectAllOutbox.integer(at: 2)))
            }
        }
        do {
            defer { selectAllInbox.reset() }
            while try selectAllInbox.step() {
                guard let index = position[UInt64(bitPattern: selectAllInbox.integer(at: 0))] else { continue }
                sessions[index].inbox.append(InboundMessage(seq: UInt64(bitPattern: selectAllInbox.integer(at: 1)),
                                                            payload: try payload(selectAllInbox, at: 2)))
            }
        }
        return StoreSnapshot(sessions: sessions)
    }

    private func loadIndex() throws -> StoreIndex {
        let (records, position) = try loadRecords()
        var sessions = records.map { IndexedSession(record: $0) }
        do {
            defer { selectOutboxTotals.reset() }
            while try selectOutboxTotals.step() {
                guard let index = position[UInt64(bitPattern: selectOutboxTotals.integer(at: 0))] else { continue }
                sessions[index].outboxCount = Int(selectOutboxTotals.integer(at: 1))
                sessions[index].outboxBytes = Int(selectOutboxTotals.integer(at: 2))
                sessions[index].outboxEarliestExpiryMS = selectOutboxTotals.isNull(at: 3) ? nil : selectOutboxTotals.integer(at: 3)
            }
        }
        do {
            defer { selectInboxBytes.reset() }
            while try selectInboxBytes.step() {
                guard let index = position[UInt64(bitPattern: selectInboxBytes.integer(at: 0))] else { continue }
                sessions[index].inboxBytes = Int(selectInboxBytes.integer(at: 1))
            }
        }
        return StoreIndex(sessions: sessions)
    }

    // MARK: Helpers

    /// A new sequence number must be exactly one past the highest stored (wire.md §5).
    private static func checkNext(_ seq: UInt64, after highest: UInt64, session: UInt64,
                                  direction: StoreError.Direction) throws(StoreError) {
        guard seq > highest else {
            throw StoreError.duplicateSeq(session: session, seq: seq, highest: highest, direction: direction)
        }
        guard seq == highest + 1 else {
            throw StoreError.seqGap(session: session, seq: seq, highest: highest, direction: direction)
        }
    }

    /// The CRC-32C of the payload at `column` when it lives in a segment (`payload(_:at:)` checked it).
    private static func segmentCRC(_ statement: SQLiteStatement, at column: Int32) -> UInt32? {
        statement.isNull(at: column + 1) ? nil : UInt32(truncatingIfNeeded: statement.integer(at: column + 4))
    }

    /// The payload of a row read with `payloadColumns` starting at `column`: inline, or from its segment.
    private func payload(_ statement: SQLiteStatement, at column: Int32) throws(StoreError) -> ByteBuffer {
        guard statement.isNull(at: column + 1) else {
            return try segments.read(SegmentReference(segment: statement.integer(at: column + 1),
                                                      offset: statement.integer(at: column + 2),
                                                      length: Int(statement.integer(at: column + 3)),
                                                      crc: UInt32(truncatingIfNeeded: statement.integer(at: column + 4))),
                                     allocator: bufferAllocator)
        }
        return statement.withBlob(at: column) { bytes in
            var buffer = bufferAllocator.buffer(capacity: bytes.count)
            buffer.writeBytes(bytes)
            return buffer
        }
    }

    /// Binds `payload` at `column` inline, or (large) appends it to a segment and binds an empty
    /// payload and the reference to the four columns from `reference` on.
    private func bindPayload(_ payload: ByteBuffer, crc: UInt32?, to statement: SQLiteStatement, at column: Int32,
                             reference: Int32) throws {
        guard payload.readableBytes >= largePayloadBytes else {
            // The segment columns stay NULL: every statement starts with its parameters cleared (`reset`).
            try payload.withUnsafeReadableBytes { (bytes) throws(SQLiteError) in try statement.bind(bytes: bytes, at: column) }
            return
        }
        let stored = try payload.withUnsafeReadableBytes { (bytes) throws(StoreError) in
            try segments.append(bytes, crc: crc, limit: segmentLimit)
        }
        try statement.bind([UInt8](), at: column)
        try statement.bind(stored.segment, at: reference)
        try statement.bind(stored.offset, at: reference + 1)
        try statement.bind(Int64(stored.length), at: reference + 2)
        try statement.bind(Int64(stored.crc), at: reference + 3)
    }

    /// Whether a row of either queue still refers to `segment`.
    func segmentIsUsed(_ segment: Int64) throws -> Bool {
        try Self.isUsed(segment, outbox: selectOutboxSegmentUsed, inbox: selectInboxSegmentUsed)
    }

    private static func isUsed(_ segment: Int64, outbox: SQLiteStatement, inbox: SQLiteStatement) throws -> Bool {
        for statement in [outbox, inbox] {
            defer { statement.reset() }
            try statement.bind(segment, at: 1)
            if try statement.step() { return true }
        }
        return false
    }

    private static func state(_ text: String?) throws(StoreError) -> StoredSessionState {
        // The CHECK constraint admits only these three; anything else is a damaged file.
        guard let text, let state = StoredSessionState(rawValue: text) else {
            throw StoreError.corrupt("sessions.state holds \(text ?? "NULL"), which its CHECK constraint forbids")
        }
        return state
    }

    private static func record(from row: SQLiteStatement) throws(StoreError) -> SessionRecord {
        SessionRecord(id: UInt64(bitPattern: row.integer(at: 0)),
                      service: row.text(at: 1) ?? "",
                      ownerUID: UInt32(truncatingIfNeeded: row.integer(at: 2)),
                      priority: UInt8(truncatingIfNeeded: row.integer(at: 3)),
                      durable: row.integer(at: 4) != 0,
                      state: try state(row.text(at: 5)),
                      failureCode: row.isNull(at: 6) ? nil : UInt16(truncatingIfNeeded: row.integer(at: 6)),
                      sentSeq: UInt64(bitPattern: row.integer(at: 7)),
                      ackedSeq: UInt64(bitPattern: row.integer(at: 8)),
                      receivedSeq: UInt64(bitPattern: row.integer(at: 9)),
                      deliveredSeq: UInt64(bitPattern: row.integer(at: 10)),
                      createdMS: row.integer(at: 11))
    }
}
