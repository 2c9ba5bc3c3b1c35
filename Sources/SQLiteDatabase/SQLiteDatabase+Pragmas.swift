import CSQLite

/// Typed access to the few PRAGMAs the stores need, so callers never build
/// PRAGMA strings by hand (PRAGMA arguments cannot be bound as parameters).
extension SQLiteDatabase {
    /// `PRAGMA user_version`: a 32-bit integer in the database header that SQLite
    /// never touches itself; schema migrations keep their version number here.
    public var userVersion: Int32 {
        get throws(SQLiteError) { Int32(truncatingIfNeeded: try queryInteger("PRAGMA user_version") ?? 0) }
    }

    /// Sets `PRAGMA user_version`. Inside a transaction the change commits or rolls back with it.
    public func setUserVersion(_ version: Int32) throws(SQLiteError) {
        try execute("PRAGMA user_version=\(version)")
    }

    /// The size of one database page in bytes (`PRAGMA page_size`).
    public var pageSize: Int {
        get throws(SQLiteError) { Int(try queryInteger("PRAGMA page_size") ?? 4096) }
    }

    /// Caps the database file at `pages` pages (`PRAGMA max_page_count`); a write
    /// that would grow it further fails with `SQLITE_FULL` and its transaction
    /// can be rolled back cleanly. The setting lasts for this connection only.
    ///
    /// - Returns: the limit now in force; SQLite never sets it below the current size.
    @discardableResult
    public func setMaxPageCount(_ pages: Int) throws(SQLiteError) -> Int {
        Int(try queryInteger("PRAGMA max_page_count=\(pages)") ?? Int64(pages))
    }

    /// The most memory this connection's page cache may hold, in bytes (`PRAGMA cache_size`
    /// with a negative argument, which SQLite reads as KiB). The cache grows only as pages
    /// are used, up to this. The setting lasts for this connection only.
    public var pageCacheBytes: Int {
        get throws(SQLiteError) {
            let setting = Int(try queryInteger("PRAGMA cache_size") ?? -2000)
            // Positive: a number of pages; negative: KiB.
            return setting >= 0 ? setting * (try pageSize) : -setting * 1024
        }
    }

    /// Sets the page cache's limit to `bytes` (rounded down to whole KiB, at least 1 KiB).
    public func setPageCacheBytes(_ bytes: Int) throws(SQLiteError) {
        try execute("PRAGMA cache_size=-\(max(1, bytes / 1024))")
    }

    /// What SQLite does with the content of deleted rows (`PRAGMA secure_delete`).
    public enum SecureDelete: Int64, Sendable {
        /// Freed pages keep their old content until they are reused.
        case off = 0
        /// Every freed page and cell is overwritten with zeros, and written out again.
        case on = 1
        /// Deleted content is zeroed only on pages written anyway (b-tree pages), so it
        /// costs no extra I/O; freed overflow pages keep their content until reused.
        case fast = 2
    }

    /// `PRAGMA secure_delete` of this connection. Some builds of SQLite (Debian's among
    /// them) default to `.on`.
    public var secureDelete: SecureDelete {
        get throws(SQLiteError) { SecureDelete(rawValue: try queryInteger("PRAGMA secure_delete") ?? 0) ?? .on }
    }

    /// Sets `PRAGMA secure_delete` for this connection.
    public func setSecureDelete(_ mode: SecureDelete) throws(SQLiteError) {
        let name = switch mode {
        case .off: "OFF"
        case .on: "ON"
        case .fast: "FAST"
        }
        try execute("PRAGMA secure_delete=\(name)")
    }

    /// Pages in the database file now (`PRAGMA page_count`).
    public var pageCount: Int {
        get throws(SQLiteError) { Int(try queryInteger("PRAGMA page_count") ?? 0) }
    }

    /// Pages in the file that hold no data (`PRAGMA freelist_count`); new rows reuse them
    /// before the file grows.
    public var freePageCount: Int {
        get throws(SQLiteError) { Int(try queryInteger("PRAGMA freelist_count") ?? 0) }
    }

    /// `PRAGMA integrity_check`: `["ok"]` for a sound database, otherwise one line per problem found.
    /// `quick`: `PRAGMA quick_check`, which reads every page but skips comparing
    /// indexes with their tables, in a fraction of the time.
    public func integrityCheck(quick: Bool = false) throws(SQLiteError) -> [String] {
        let statement = try prepare(quick ? "PRAGMA quick_check" : "PRAGMA integrity_check")
        var lines: [String] = []
        while try statement.step() {
            lines.append(statement.text(at: 0) ?? "")
        }
        return lines
    }

    /// True while a transaction is open on this connection (SQLite is not in autocommit mode).
    public var isInTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }
}
