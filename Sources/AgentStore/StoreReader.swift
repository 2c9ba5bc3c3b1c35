import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import SQLiteDatabase

/// A second, read-only connection on a thread of its own, for the windows' range
/// reads (`AgentStore.readOutbound`/`readInbound`).
///
/// Why: on the writer thread a read of a batch of 16 KiB rows sits in the commit
/// queue like a write, so a live message's commit waited behind the backlog's
/// reads during a long drain. In WAL mode a reader never blocks the writer nor
/// waits for it, so the reads move here and commits wait for no read.
///
/// What a read sees: each read is one statement in its own (autocommit) read
/// transaction, so it sees every transaction committed before it started, and
/// nothing of one still queued or running. A caller that issues a read after the
/// future of the commit that stored the rows completed therefore sees them. A
/// deletion (ACK, expiry, close) submitted but not yet committed when the read
/// starts is not seen: the caller must not ask for rows it is deleting meanwhile
/// (the daemon reads only after its window, where nothing is deleted while a read
/// is under way), or must skip what it already knows is gone.
///
/// Only the reader thread touches the connection, hence `@unchecked Sendable`.
final class StoreReader: @unchecked Sendable {
    private let database: SQLiteDatabase
    private let selectOutboxAfter: SQLiteStatement
    private let selectInboxAfter: SQLiteStatement
    private let allocator = ByteBufferAllocator()

    /// Opens `path`, which the writer has already created and migrated, read-only.
    init(path: String) throws(StoreError) {
        do {
            // The writer set WAL mode in the file itself; this connection only reads it.
            database = try SQLiteDatabase(path: path, walMode: false, busyTimeoutMS: 5000)
            try database.execute("PRAGMA query_only=1")
            selectOutboxAfter = try database.prepare(
                "SELECT seq, payload, expires_ms FROM outbox WHERE session = ? AND seq > ? ORDER BY seq LIMIT ?")
            selectInboxAfter = try database.prepare(
                "SELECT seq, payload FROM inbox WHERE session = ? AND seq > ? ORDER BY seq LIMIT ?")
        } catch {
            throw StoreError(error)
        }
    }

    func outbound(session: UInt64, after: UInt64, limit: Int, maxBytes: Int) throws(StoreError) -> [OutboundMessage] {
        try rows(selectOutboxAfter, session: session, after: after, limit: limit, maxBytes: maxBytes) { statement, payload in
            OutboundMessage(seq: UInt64(bitPattern: statement.integer(at: 0)), payload: payload,
                            expiresAtMS: statement.isNull(at: 2) ? nil : statement.integer(at: 2))
        }
    }

    func inbound(session: UInt64, after: UInt64, limit: Int, maxBytes: Int) throws(StoreError) -> [InboundMessage] {
        try rows(selectInboxAfter, session: session, after: after, limit: limit, maxBytes: maxBytes) { statement, payload in
            InboundMessage(seq: UInt64(bitPattern: statement.integer(at: 0)), payload: payload)
        }
    }

    /// Up to `limit` rows after `after`, no more than `maxBytes` of payload but at
    /// least one row (the same rule as the writer's reads).
    private func rows<Row>(_ statement: SQLiteStatement, session: UInt64, after: UInt64, limit: Int, maxBytes: Int,
                           _ make: (SQLiteStatement, ByteBuffer) -> Row) throws(StoreError) -> [Row] {
        // The reset ends the read transaction, so the next read sees the newest commit.
        defer { statement.reset() }
        var result: [Row] = []
        do {
            try statement.bind([.integer(Int64(bitPattern: session)), .integer(Int64(bitPattern: after)), .integer(Int64(limit))])
            var bytes = 0
            while bytes < maxBytes, try statement.step() {
                let payload = statement.withBlob(at: 1) { raw in
                    var buffer = allocator.buffer(capacity: raw.count)
                    buffer.writeBytes(raw)
                    return buffer
                }
                guard result.isEmpty || bytes + payload.readableBytes <= maxBytes else { break }
                bytes += payload.readableBytes
                result.append(make(statement, payload))
            }
        } catch {
            throw StoreError(error)
        }
        return result
    }
}
