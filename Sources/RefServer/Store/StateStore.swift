import NIOCore
import SQLiteDatabase
import Synchronization

/// The server's durable state in one SQLite file (WAL): sessions' sequence
/// counters, sessions closed for good, and undelivered server→agent messages.
///
/// Commits run on the server's store thread, never on the event loop; the
/// mutex only makes that confinement checkable by the compiler (there is one
/// committer at a time, so it is never contended).
final class StateStore: Sendable {
    let path: String
    private let connection: Mutex<Connection>

    /// Opens or creates the file and its schema.
    init(path: String) throws(SQLiteError) {
        self.path = path
        connection = Mutex(try Connection(path: path))
    }

    /// Everything stored, for the server to start from.
    func load() throws -> StoredState {
        try connection.withLock { connection in try connection.load() }
    }

    /// Applies `operations` in one transaction: all of them or none.
    func commit(_ operations: [StoreOperation]) throws {
        try connection.withLock { connection in try connection.commit(operations) }
    }
}

extension StateStore {
    /// The database handle with its prepared statements, reused for every batch.
    final class Connection {
        static let schema = """
            CREATE TABLE IF NOT EXISTS sessions(
                agent TEXT NOT NULL, id INTEGER NOT NULL, service TEXT NOT NULL,
                inbound_last INTEGER NOT NULL, outbound_last INTEGER NOT NULL, outbound_acked INTEGER NOT NULL,
                PRIMARY KEY(agent, id)) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS closed_sessions(
                agent TEXT NOT NULL, id INTEGER NOT NULL, PRIMARY KEY(agent, id)) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS outbox(
                agent TEXT NOT NULL, session INTEGER NOT NULL, seq INTEGER NOT NULL,
                compressed INTEGER NOT NULL, body BLOB NOT NULL,
                PRIMARY KEY(agent, session, seq)) WITHOUT ROWID;
            """

        let database: SQLiteDatabase
        let saveSession: SQLiteStatement
        let insertMessage: SQLiteStatement
        let deleteMessages: SQLiteStatement
        let deleteSession: SQLiteStatement
        let deleteSessionMessages: SQLiteStatement
        let insertClosed: SQLiteStatement

        init(path: String) throws(SQLiteError) {
            // NORMAL in WAL mode survives a crash of this process, which is
            // what a restart test exercises; power loss is not our concern.
            database = try SQLiteDatabase(path: path, walMode: true, busyTimeoutMS: 5000, synchronous: .normal)
            try database.execute(Self.schema)
            saveSession = try database.prepare("""
                INSERT INTO sessions(agent, id, service, inbound_last, outbound_last, outbound_acked)
                VALUES(?1, ?2, ?3, ?4, ?5, ?6)
                ON CONFLICT(agent, id) DO UPDATE SET inbound_last = ?4, outbound_last = ?5, outbound_acked = ?6
                """)
            insertMessage = try database.prepare(
                "INSERT OR REPLACE INTO outbox(agent, session, seq, compressed, body) VALUES(?1, ?2, ?3, ?4, ?5)")
            deleteMessages = try database.prepare("DELETE FROM outbox WHERE agent = ?1 AND session = ?2 AND seq <= ?3")
            deleteSession = try database.prepare("DELETE FROM sessions WHERE agent = ?1 AND id = ?2")
            deleteSessionMessages = try database.prepare("DELETE FROM outbox WHERE agent = ?1 AND session = ?2")
            insertClosed = try database.prepare("INSERT OR IGNORE INTO closed_sessions(agent, id) VALUES(?1, ?2)")
        }

        func commit(_ operations: [StoreOperation]) throws {
            try database.transaction {
                for operation in operations {
                    try apply(operation)
                }
            }
        }

        private func apply(_ operation: StoreOperation) throws(SQLiteError) {
            switch operation {
            case .saveSession(let record):
                try saveSession.run([
                    .text(record.key.agent), .integer(Int64(bitPattern: record.key.id)), .text(record.service.rawValue),
                    .integer(Int64(bitPattern: record.inboundLast)), .integer(Int64(bitPattern: record.outboundLast)),
                    .integer(Int64(bitPattern: record.outboundAcked)),
                ])
            case .insertMessage(let key, let message):
                try insertMessage.run([
                    .text(key.agent), .integer(Int64(bitPattern: key.id)), .integer(Int64(bitPattern: message.seq)),
                    .integer(message.compressed ? 1 : 0), .blob(Array(message.body.readableBytesView)),
                ])
            case .deleteMessages(let key, let seq):
                try deleteMessages.run([.text(key.agent), .integer(Int64(bitPattern: key.id)), .integer(Int64(bitPattern: seq))])
            case .closeSession(let key):
                let values: [SQLiteValue] = [.text(key.agent), .integer(Int64(bitPattern: key.id))]
                try deleteSession.run(values)
                try deleteSessionMessages.run(values)
                try insertClosed.run(values)
            }
        }

        func load() throws(SQLiteError) -> StoredState {
            var state = StoredState()
            let sessions = try database.prepare(
                "SELECT agent, id, service, inbound_last, outbound_last, outbound_acked FROM sessions ORDER BY agent, id")
            while try sessions.step() {
                let key = SessionKey(agent: sessions.text(at: 0) ?? "", id: UInt64(bitPattern: sessions.integer(at: 1)))
                let serviceName = sessions.text(at: 2) ?? ""
                guard let service = Service(rawValue: serviceName) else {
                    throw SQLiteError(code: 0, message: "session \(key) has unknown service \"\(serviceName)\"", context: "load \(path)")
                }
                state.sessions.append(SessionRecord(
                    key: key, service: service,
                    inboundLast: UInt64(bitPattern: sessions.integer(at: 3)),
                    outboundLast: UInt64(bitPattern: sessions.integer(at: 4)),
                    outboundAcked: UInt64(bitPattern: sessions.integer(at: 5))))
            }
            let closed = try database.prepare("SELECT agent, id FROM closed_sessions")
            while try closed.step() {
                state.closed.insert(SessionKey(agent: closed.text(at: 0) ?? "", id: UInt64(bitPattern: closed.integer(at: 1))))
            }
            let messages = try database.prepare("SELECT agent, session, seq, compressed, body FROM outbox ORDER BY agent, session, seq")
            while try messages.step() {
                let key = SessionKey(agent: messages.text(at: 0) ?? "", id: UInt64(bitPattern: messages.integer(at: 1)))
                let body = messages.withBlob(at: 4) { ByteBuffer(bytes: $0) }
                state.messages[key, default: []].append(OutboundMessage(
                    seq: UInt64(bitPattern: messages.integer(at: 2)), compressed: messages.integer(at: 3) != 0, body: body))
            }
            return state
        }

        private var path: String { database.path }
    }
}
