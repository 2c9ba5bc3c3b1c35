import CSQLite

/// One open SQLite database connection.
///
/// Not `Sendable`: a connection is used by one owner at a time (one thread, or
/// behind the owner's lock). So SQLite is opened with `SQLITE_OPEN_NOMUTEX` and
/// without memory statistics: on the message path its own mutexes would be taken
/// a dozen times per message, for nothing.
public final class SQLiteDatabase {
    /// The raw handle, for the few calls this wrapper does not cover.
    public let handle: OpaquePointer
    /// The path given to `init`, for error messages.
    public let path: String

    /// Opens (creating if needed) the database at `path`.
    ///
    /// - Parameters:
    ///   - walMode: switch the journal to write-ahead logging, so readers never
    ///     block the writer and a commit is one append to the log.
    ///   - busyTimeoutMS: how long a statement waits for another connection's
    ///     lock before failing with `SQLITE_BUSY`.
    ///   - synchronous: the durability level (see `Synchronous`).
    public init(path: String, walMode: Bool = true, busyTimeoutMS: Int32 = 5000, synchronous: Synchronous = .normal) throws(SQLiteError) {
        handle = try Self.open(path, flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, busyTimeoutMS: busyTimeoutMS, context: "open \(path)")
        self.path = path
        if walMode {
            let mode = try queryText("PRAGMA journal_mode=WAL")
            guard mode?.lowercased() == "wal" else {
                throw SQLiteError(code: SQLITE_ERROR, message: "journal mode stayed \(mode ?? "unknown")",
                                  context: "switch \(path) to WAL")
            }
        }
        try execute("PRAGMA synchronous=\(synchronous.rawValue)")
    }

    /// Opens the existing database at `path` for reading only: no file is
    /// created, the journal mode and durability are left as the file has
    /// them, and a write fails with `SQLITE_READONLY`.
    public init(readingOnly path: String, busyTimeoutMS: Int32 = 5000) throws(SQLiteError) {
        handle = try Self.open(path, flags: SQLITE_OPEN_READONLY, busyTimeoutMS: busyTimeoutMS, context: "open \(path) read-only")
        self.path = path
    }

    /// SQLite's process-wide settings, made once before its first connection.
    private static let configured: Void = {
        _ = imagent_sqlite3_disable_memory_statistics()
    }()

    /// A connection to `path` for one owner at a time, with extended result codes and the busy timeout set.
    private static func open(_ path: String, flags: Int32, busyTimeoutMS: Int32, context: String) throws(SQLiteError) -> OpaquePointer {
        Self.configured
        var raw: OpaquePointer?
        let result = sqlite3_open_v2(path, &raw, flags | SQLITE_OPEN_NOMUTEX, nil)
        guard result == SQLITE_OK, let raw else {
            let error = SQLiteError.from(code: result, handle: raw, context: context)
            sqlite3_close_v2(raw)
            throw error
        }
        sqlite3_extended_result_codes(raw, 1)
        sqlite3_busy_timeout(raw, busyTimeoutMS)
        return raw
    }

    deinit {
        // v2 defers the close until every statement is finalized, so a
        // statement that outlives us cannot touch freed memory.
        sqlite3_close_v2(handle)
    }

    /// Runs one or more SQL statements that return no rows (DDL, PRAGMA, BEGIN…).
    public func execute(_ sql: String) throws(SQLiteError) {
        var message: UnsafeMutablePointer<CChar>?
        let result = sqlite3_exec(handle, sql, nil, nil, &message)
        guard result == SQLITE_OK else {
            let text = message.map { String(cString: $0) } ?? String(cString: sqlite3_errstr(result))
            sqlite3_free(message)
            throw SQLiteError(code: result, message: text, context: "execute \(Self.abbreviated(sql))")
        }
    }

    /// Compiles `sql` into a statement to bind, step and reuse.
    public func prepare(_ sql: String) throws(SQLiteError) -> SQLiteStatement {
        try SQLiteStatement(database: self, sql: sql)
    }

    /// Runs `body` inside `BEGIN IMMEDIATE … COMMIT`; rolls back if it throws.
    ///
    /// `IMMEDIATE` takes the write lock up front, so a transaction never fails
    /// half-way with `SQLITE_BUSY` when it first writes.
    public func transaction<Result>(_ body: () throws -> Result) throws -> Result {
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            // The transaction may already be gone (SQLite rolls back on some errors).
            if sqlite3_get_autocommit(handle) == 0 { try? execute("ROLLBACK") }
            throw error
        }
    }

    /// The rowid of the last successful INSERT on this connection.
    public var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(handle) }

    /// Rows changed by the last INSERT, UPDATE or DELETE.
    public var changes: Int { Int(sqlite3_changes(handle)) }

    /// The first column of the first row of `sql` as text, or nil when there is no row.
    public func queryText(_ sql: String) throws(SQLiteError) -> String? {
        let statement = try prepare(sql)
        guard try statement.step() else { return nil }
        return statement.text(at: 0)
    }

    /// The first column of the first row of `sql` as an integer, or nil when there is no row.
    public func queryInteger(_ sql: String) throws(SQLiteError) -> Int64? {
        let statement = try prepare(sql)
        guard try statement.step() else { return nil }
        return statement.isNull(at: 0) ? nil : statement.integer(at: 0)
    }

    static func abbreviated(_ sql: String) -> String {
        sql.count <= 80 ? sql : String(sql.prefix(77)) + "..."
    }
}
