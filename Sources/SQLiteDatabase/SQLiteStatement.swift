import CSQLite

/// A compiled statement: bind parameters (1-based, as in SQLite), `step`
/// through rows, read columns (0-based), `reset` and reuse.
///
/// Keeps its database alive, so it can never outlive the connection.
public final class SQLiteStatement {
    public let database: SQLiteDatabase
    public let sql: String
    private let handle: OpaquePointer

    init(database: SQLiteDatabase, sql: String) throws(SQLiteError) {
        var raw: OpaquePointer?
        let result = sqlite3_prepare_v2(database.handle, sql, -1, &raw, nil)
        guard result == SQLITE_OK, let raw else {
            throw SQLiteError.from(code: result, handle: database.handle, context: "prepare \(SQLiteDatabase.abbreviated(sql))")
        }
        self.database = database
        self.sql = sql
        self.handle = raw
    }

    deinit {
        sqlite3_finalize(handle)
    }

    // MARK: Binding

    public func bind(_ value: Int64, at index: Int32) throws(SQLiteError) {
        try check(sqlite3_bind_int64(handle, index, value), "bind integer to parameter \(index)")
    }

    public func bind(_ value: String, at index: Int32) throws(SQLiteError) {
        // SQLITE_TRANSIENT: SQLite copies the bytes, so the Swift string may go away.
        try check(sqlite3_bind_text(handle, index, value, -1, Self.transient), "bind text to parameter \(index)")
    }

    public func bind(_ bytes: [UInt8], at index: Int32) throws(SQLiteError) {
        let result = bytes.withUnsafeBytes { raw in
            // A zero-length blob needs a non-NULL pointer, or SQLite stores NULL.
            sqlite3_bind_blob(handle, index, raw.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(raw.count), Self.transient)
        }
        try check(result, "bind blob to parameter \(index)")
    }

    /// Binds a blob straight from memory the caller owns for the duration of the call (SQLite copies it).
    public func bind(bytes: UnsafeRawBufferPointer, at index: Int32) throws(SQLiteError) {
        let result = sqlite3_bind_blob(handle, index, bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1),
                                       Int32(bytes.count), Self.transient)
        try check(result, "bind blob to parameter \(index)")
    }

    public func bindNull(at index: Int32) throws(SQLiteError) {
        try check(sqlite3_bind_null(handle, index), "bind NULL to parameter \(index)")
    }

    public func bind(_ value: SQLiteValue, at index: Int32) throws(SQLiteError) {
        switch value {
        case .null: try bindNull(at: index)
        case .integer(let integer): try bind(integer, at: index)
        case .text(let text): try bind(text, at: index)
        case .blob(let bytes): try bind(bytes, at: index)
        }
    }

    /// Binds `values` to parameters 1, 2, 3, … in order.
    public func bind(_ values: [SQLiteValue]) throws(SQLiteError) {
        for (offset, value) in values.enumerated() {
            try bind(value, at: Int32(offset + 1))
        }
    }

    // MARK: Stepping

    /// Advances to the next row: true when a row is ready to read, false when done.
    @discardableResult
    public func step() throws(SQLiteError) -> Bool {
        let result = sqlite3_step(handle)
        switch result {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw SQLiteError.from(code: result, handle: database.handle, context: "step \(SQLiteDatabase.abbreviated(sql))")
        }
    }

    /// Resets the statement for another run and clears its bindings.
    public func reset() {
        // sqlite3_reset repeats the last step's error, which step() already reported.
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    /// Binds `values`, steps to completion, and resets: one write statement in one call.
    public func run(_ values: [SQLiteValue] = []) throws(SQLiteError) {
        defer { reset() }
        try bind(values)
        while try step() {}
    }

    // MARK: Columns (valid until the next step or reset)

    public var columnCount: Int32 { sqlite3_column_count(handle) }

    public func isNull(at column: Int32) -> Bool {
        sqlite3_column_type(handle, column) == SQLITE_NULL
    }

    public func integer(at column: Int32) -> Int64 {
        sqlite3_column_int64(handle, column)
    }

    /// The column as text, or nil when it is NULL.
    public func text(at column: Int32) -> String? {
        guard let pointer = sqlite3_column_text(handle, column) else { return nil }
        let count = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: pointer, count: count), as: UTF8.self)
    }

    /// The column as bytes; NULL and the empty blob both read as `[]`.
    public func blob(at column: Int32) -> [UInt8] {
        guard let pointer = sqlite3_column_blob(handle, column) else { return [] }
        let count = Int(sqlite3_column_bytes(handle, column))
        return Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// Lends the column's bytes without copying them; the pointer is valid only inside `body`.
    public func withBlob<Result>(at column: Int32, _ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        let pointer = sqlite3_column_blob(handle, column)
        let count = Int(sqlite3_column_bytes(handle, column))
        return try body(UnsafeRawBufferPointer(start: pointer, count: pointer == nil ? 0 : count))
    }

    public func value(at column: Int32) -> SQLiteValue {
        switch sqlite3_column_type(handle, column) {
        case SQLITE_NULL: .null
        case SQLITE_INTEGER: .integer(integer(at: column))
        case SQLITE_BLOB: .blob(blob(at: column))
        default: text(at: column).map(SQLiteValue.text) ?? .null
        }
    }

    private func check(_ result: Int32, _ context: @autoclosure () -> String) throws(SQLiteError) {
        guard result == SQLITE_OK else {
            throw SQLiteError.from(code: result, handle: database.handle, context: context())
        }
    }

    /// SQLite's `SQLITE_TRANSIENT` (-1), which the C macro spells as a cast Swift cannot import.
    private static var transient: sqlite3_destructor_type { unsafeBitCast(-1 as Int, to: sqlite3_destructor_type.self) }
}
