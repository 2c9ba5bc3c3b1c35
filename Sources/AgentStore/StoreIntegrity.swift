import CSQLite
import SQLiteDatabase

/// SQLite's own check of a store file, on a read-only connection: for
/// `imagentd --check-store` on a stopped daemon's store, and for a start that
/// failed on its store, to tell a damaged file from other failures.
public enum StoreIntegrity {
    public enum Verdict: Equatable, Sendable {
        case sound
        /// SQLite's words for each problem found (at most 100).
        case damaged([String])
    }

    /// `quick`: `PRAGMA quick_check` instead of `integrity_check` (every page
    /// read, indexes not compared with their tables). Throws when the file
    /// cannot be read for another reason than damage (missing, permissions).
    public static func check(path: String, quick: Bool = false) throws(StoreError) -> Verdict {
        do {
            let lines = try SQLiteDatabase(readingOnly: path).integrityCheck(quick: quick)
            return lines == ["ok"] ? .sound : .damaged(lines)
        } catch {
            switch error.primaryCode {
            case SQLITE_CORRUPT, SQLITE_NOTADB: return .damaged([error.description])
            default: throw StoreError(error)
            }
        }
    }
}
