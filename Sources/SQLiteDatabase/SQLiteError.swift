import CSQLite

/// A failed SQLite call: the result code, SQLite's own message, and what we
/// were doing when it failed, so a log line explains itself.
public struct SQLiteError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The (extended) SQLite result code, e.g. `SQLITE_BUSY` (5).
    public var code: Int32
    /// SQLite's message for the failure (`sqlite3_errmsg`, or `sqlite3_errstr` without a handle).
    public var message: String
    /// The operation that failed: "open /var/lib/x.db", "prepare SELECT …", "step".
    public var context: String

    public init(code: Int32, message: String, context: String) {
        self.code = code
        self.message = message
        self.context = context
    }

    /// The primary result code, without the extended bits (`SQLITE_IOERR_FSYNC` → `SQLITE_IOERR`).
    public var primaryCode: Int32 { code & 0xFF }

    public var description: String {
        "SQLite error \(code) during \(context): \(message)"
    }

    /// The error for `code` as reported by `handle` (or by the library when there is no handle).
    static func from(code: Int32, handle: OpaquePointer?, context: String) -> SQLiteError {
        let text = handle.flatMap { sqlite3_errmsg($0) }.map { String(cString: $0) }
            ?? String(cString: sqlite3_errstr(code))
        return SQLiteError(code: code, message: text, context: context)
    }
}
