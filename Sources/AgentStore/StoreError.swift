import CSQLite
import SQLiteDatabase

/// Why a store operation failed.
///
/// Two families: *batch* failures (`full`, `io`, `corrupt`, `database`) come from
/// SQLite while committing and fail every operation of that transaction, which
/// is rolled back, so the file stays exactly as it was; *request* failures
/// (`unknownSession`, `duplicateSeq`, …) are a caller's mistake found by checking
/// the counters and fail only the submission that made it.
public enum StoreError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The database reached `maximumSizeBytes` or the disk is full (SQLITE_FULL).
    /// Nothing of the batch was stored. Answer senders with QUEUE_FULL; the store
    /// works again as soon as acknowledgements free space or the disk has room.
    case full(String)
    /// The operating system failed a read, write or fsync (SQLITE_IOERR*). Nothing
    /// of the batch was stored; check the disk and the kernel log.
    case io(String)
    /// SQLite found the file damaged (SQLITE_CORRUPT, SQLITE_NOTADB). Stop the
    /// daemon and restore or move the database aside.
    case corrupt(String)
    /// Any other SQLite failure, with SQLite's own words.
    case database(String)
    /// The file's schema is newer than this build understands; refuse to touch it.
    case schemaTooNew(found: Int32, supported: Int32, path: String)
    /// No session has this id.
    case unknownSession(UInt64)
    /// The session exists but is not open (failed or closed), so nothing new may be queued.
    case sessionNotOpen(UInt64, StoredSessionState)
    /// `createSession(id:)` with an id already used by a session (open, failed or closed).
    case sessionExists(UInt64)
    /// A seq at or below the highest already stored for this session and direction:
    /// the caller assigned or passed on the same seq twice.
    case duplicateSeq(session: UInt64, seq: UInt64, highest: UInt64, direction: Direction)
    /// A seq more than one past the highest stored: a message in between is missing.
    case seqGap(session: UInt64, seq: UInt64, highest: UInt64, direction: Direction)
    /// An acknowledgement for a seq that was never stored in that direction.
    case ackBeyondStored(session: UInt64, seq: UInt64, highest: UInt64, direction: Direction)
    /// The store was closed; the operation was not run.
    case closed

    /// The direction a sequence number belongs to.
    public enum Direction: String, Sendable, Hashable {
        case outbound
        case inbound
    }

    public var description: String {
        switch self {
        case .full(let message):
            "store full (\(message)): nothing was stored; refuse new messages until acknowledgements free space or the disk has room"
        case .io(let message):
            "store I/O error (\(message)): nothing was stored; check the disk and the kernel log"
        case .corrupt(let message):
            "store database is damaged (\(message)): stop the daemon and restore or move the database aside"
        case .database(let message):
            "store database error: \(message)"
        case .schemaTooNew(let found, let supported, let path):
            "\(path) has schema version \(found), but this imagentd understands only up to \(supported): run a newer imagentd or move the database aside"
        case .unknownSession(let id):
            "no session \(id) in the store"
        case .sessionNotOpen(let id, let state):
            "session \(id) is \(state.rawValue), so nothing new can be queued on it"
        case .sessionExists(let id):
            "session id \(id) is already used (ids are never reused): allocate a new one"
        case .duplicateSeq(let session, let seq, let highest, let direction):
            "\(direction.rawValue) seq \(seq) of session \(session) is a duplicate: seqs up to \(highest) are already stored"
        case .seqGap(let session, let seq, let highest, let direction):
            "\(direction.rawValue) seq \(seq) of session \(session) leaves a gap: the next one must be \(highest &+ 1)"
        case .ackBeyondStored(let session, let seq, let highest, let direction):
            "acknowledgement of \(direction.rawValue) seq \(seq) of session \(session), but only seqs up to \(highest) were stored"
        case .closed:
            "the store is closed"
        }
    }

    /// Whether this failure came from the database (and failed the whole batch)
    /// rather than from one request's arguments.
    public var isBatchFailure: Bool {
        switch self {
        case .full, .io, .corrupt, .database, .schemaTooNew, .closed: true
        case .unknownSession, .sessionNotOpen, .sessionExists, .duplicateSeq, .seqGap, .ackBeyondStored: false
        }
    }

    /// Classifies a SQLite failure by its primary result code.
    init(_ error: SQLiteError) {
        let text = error.description
        switch error.primaryCode {
        case SQLITE_FULL: self = .full(text)
        case SQLITE_IOERR: self = .io(text)
        case SQLITE_CORRUPT, SQLITE_NOTADB: self = .corrupt(text)
        default: self = .database(text)
        }
    }
}
