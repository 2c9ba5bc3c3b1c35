import CSQLite
import NIOConcurrencyHelpers
import SQLiteDatabase

/// The one connection that writes, and the rules of a group commit.
///
/// A batch is every submission the queue collected while the previous commit
/// ran. It is applied in ONE transaction (`BEGIN IMMEDIATE … COMMIT`), each
/// submission of several operations inside its own savepoint:
///
/// - a submission that breaks a rule (duplicate seq, unknown session, …) is
///   rolled back to its savepoint and fails alone; the rest of the batch commits.
///   A submission of one operation needs no savepoint (the daemon's are all of
///   one): an operation checks its rules before it writes, and a statement that
///   fails on a constraint is undone by SQLite alone;
/// - a SQLite failure (full, I/O, …) rolls back the whole transaction and fails
///   every submission of the batch with the same `StoreError`, so the file is
///   exactly as before the batch;
/// - after `StoreError.full`, the submissions that cannot grow the file
///   (acknowledgements, closes, expiry, reads) are retried at once in a
///   transaction of their own: they free space, and refusing them too would
///   leave a full store stuck full.
///
/// Only the writer thread touches an instance (the queue's `draining` flag
/// hands it from one drain to the next under a lock), hence `@unchecked Sendable`.
final class StoreWriter: @unchecked Sendable {
    private let database: SQLiteDatabase
    private let applier: OperationApplier
    private let statistics: NIOLockedValueBox<StoreStatistics>
    private let observer: StoreCommitObserver?
    private let maximumSizeBytes: Int?
    private let pageSize: Int
    private let durability: Durability
    /// The database's share of `maximumSizeBytes` last given to SQLite, in pages.
    private var maximumPages = 0
    /// Whether the last transaction appended payloads to the segment files (the writer's linger follows it or not).
    var lastTransactionWrotePayloadFiles: Bool { applier.segments.appendedInTransaction }

    private let begin: SQLiteStatement
    private let commit: SQLiteStatement
    private let savepoint: SQLiteStatement
    private let releaseSavepoint: SQLiteStatement
    private let rollbackToSavepoint: SQLiteStatement

    /// The WAL is truncated back to this size when a checkpoint empties it, so one
    /// huge batch does not keep its disk space for ever (SQLite's own default
    /// checkpoint, every 1000 pages ≈ 4 MiB, stays in force).
    static let walSizeLimitBytes = 8 * 1024 * 1024

    /// Opens the database, brings its schema up to date and applies the size limit.
    init(configuration: StoreConfiguration, statistics: NIOLockedValueBox<StoreStatistics>,
         observer: StoreCommitObserver? = nil) throws {
        do {
            database = try SQLiteDatabase(path: configuration.path, walMode: true, busyTimeoutMS: 5000,
                                          synchronous: configuration.durability.synchronous)
            try StoreSchema.migrate(database)
            try database.execute("PRAGMA journal_size_limit=\(Self.walSizeLimitBytes)")
            try database.setPageCacheBytes(configuration.pageCacheBytes)
            // Debian's SQLite is built with secure_delete on: every acknowledged message's
            // overflow pages were zeroed and written to the WAL again, a third write of each
            // payload (220 KiB of writes per 64 KiB message instead of 132). FAST still zeroes
            // deleted cells on the b-tree pages a delete writes anyway; freed overflow pages keep
            // their bytes, inside the daemon's private file, until new messages reuse them.
            try database.setSecureDelete(.fast)
            pageSize = try database.pageSize
            applier = try OperationApplier(database: database, configuration: configuration)
            begin = try database.prepare("BEGIN IMMEDIATE")
            commit = try database.prepare("COMMIT")
            savepoint = try database.prepare("SAVEPOINT submission")
            releaseSavepoint = try database.prepare("RELEASE submission")
            rollbackToSavepoint = try database.prepare("ROLLBACK TO submission")
        } catch let error as SQLiteError {
            throw StoreError(error)
        }
        maximumSizeBytes = configuration.maximumSizeBytes
        durability = configuration.durability
        self.statistics = statistics
        self.observer = observer
    }

    /// Applies `batch` (one entry per submission) in as few transactions as the
    /// rules above allow, and returns one outcome per submission, in order.
    func apply(_ batch: [[StoreOperation]]) -> [Result<[StoreResult], StoreError>] {
        let everything = Array(batch.indices)
        do {
            return try transaction(batch, everything)
        } catch .full(let message) {
            var outcomes = [Result<[StoreResult], StoreError>](repeating: .failure(.full(message)), count: batch.count)
            let shrinking = everything.filter { !batch[$0].contains(where: \.mayGrowDatabase) }
            statistics.withLockedValue { $0.fullRejections += batch.count - shrinking.count }
            guard !shrinking.isEmpty else { return outcomes }
            do {
                let retried = try transaction(batch, shrinking)
                for (index, outcome) in zip(shrinking, retried) { outcomes[index] = outcome }
            } catch {
                for index in shrinking { outcomes[index] = .failure(error) }
            }
            return outcomes
        } catch {
            return Array(repeating: .failure(error), count: batch.count)
        }
    }

    /// One transaction over the submissions at `indices`; throws when SQLite fails
    /// the transaction itself, after rolling it back.
    private func transaction(_ batch: [[StoreOperation]], _ indices: [Int]) throws(StoreError) -> [Result<[StoreResult], StoreError>] {
        var outcomes: [Result<[StoreResult], StoreError>] = []
        outcomes.reserveCapacity(indices.count)
        var operationCount = 0
        let started = ContinuousClock.now
        do {
            applier.segments.beginTransaction()
            try limitSize()
            try step(begin)
            for index in indices {
                outcomes.append(try applySubmission(batch[index]))
                operationCount += batch[index].count
            }
            try writeCounters()
            // At `power` the payload bytes are on the disk before the commit that refers to them.
            try applier.segments.beforeCommit()
            try step(commit)
        } catch {
            // SQLite may already have rolled back (it does on some I/O and full errors).
            if database.isInTransaction { try? database.execute("ROLLBACK") }
            applier.segments.rolledBack()
            applier.transactionRolledBack()
            statistics.withLockedValue { $0.failedCommits += 1 }
            throw error
        }
        applier.transactionCommitted()
        removeUnusedSegments()
        observer?(ContinuousClock.now - started, operationCount)
        statistics.withLockedValue {
            $0.commits += 1
            $0.operations += operationCount
            $0.submissions += indices.count
            $0.largestBatch = max($0.largestBatch, operationCount)
        }
        return outcomes
    }

    /// One submission inside its savepoint: its outcome when it succeeded or broke
    /// a rule; throws only for failures that doom the whole transaction.
    private func applySubmission(_ operations: [StoreOperation]) throws(StoreError) -> Result<[StoreResult], StoreError> {
        if operations.count == 1 { return try applyAlone(operations[0]) }
        try step(savepoint)
        applier.beginSubmission()
        do {
            var results: [StoreResult] = []
            results.reserveCapacity(operations.count)
            for operation in operations {
                results.append(try applier.apply(operation))
            }
            try step(releaseSavepoint)
            applier.endSubmission(keep: true)
            return .success(results)
        } catch let error as StoreError where !error.isBatchFailure {
            try undoSubmission()
            return .failure(error)
        } catch let error as SQLiteError where error.primaryCode == SQLITE_CONSTRAINT {
            // The counter checks should make this impossible; if it happens anyway,
            // it is this submission's data, not the database, that is wrong.
            try undoSubmission()
            return .failure(.database(error.description))
        } catch let error as StoreError {
            throw error
        } catch let error as SQLiteError {
            throw StoreError(error)
        } catch {
            throw StoreError.database("\(error)")
        }
    }

    /// Splits `maximumSizeBytes` between the segment files, as they are now, and the database:
    /// SQLite refuses to grow the file past its share (`max_page_count`), and the segments refuse
    /// an append past theirs (`segmentLimit`). The spare segment stays only while the store
    /// holds at most half of `maximumSizeBytes`, so that it never takes room a message needs.
    private func limitSize() throws(StoreError) {
        guard let maximumSizeBytes else { return }
        do {
            let databaseBytes = Int(try database.queryInteger("PRAGMA page_count") ?? 0) * pageSize
            if applier.segments.spareBytes != nil, 2 * (databaseBytes + applier.segments.totalBytes) > maximumSizeBytes {
                applier.segments.removeSpare()
            }
            let pages = max(1, (maximumSizeBytes - applier.segments.totalBytes) / pageSize)
            if pages != maximumPages { maximumPages = try database.setMaxPageCount(pages) }
            applier.segmentLimit = max(0, maximumSizeBytes - databaseBytes)
        } catch {
            throw StoreError(error)
        }
    }

    /// Deletes the segment files no row refers to any more (one may stay as the spare), once
    /// the commits that deleted their rows are durable: at `power` they are; at `process` a
    /// checkpoint first syncs the WAL, so a power loss cannot bring back a row whose bytes are
    /// gone. A file that stays (a failure here) is found again after the next deletion, or at open.
    private func removeUnusedSegments() {
        guard applier.deletedRows else { return }
        applier.deletedRows = false
        let unused = applier.segments.olderSegments.filter { (try? applier.segmentIsUsed($0)) == false }
        guard !unused.isEmpty else { return }
        if durability == .process {
            guard (try? database.execute("PRAGMA wal_checkpoint(PASSIVE)")) != nil else { return }
        }
        for segment in unused { applier.segments.remove(segment) }
    }

    private func writeCounters() throws(StoreError) {
        do {
            try applier.writeCounters()
        } catch {
            throw StoreError(error)
        }
    }

    private func undoSubmission() throws(StoreError) {
        applier.endSubmission(keep: false)
        try step(rollbackToSavepoint)
        try step(releaseSavepoint)
    }

    /// A submission of one operation, without a savepoint (see the type's comment):
    /// when it breaks a rule it has written nothing.
    private func applyAlone(_ operation: StoreOperation) throws(StoreError) -> Result<[StoreResult], StoreError> {
        do {
            return .success([try applier.apply(operation)])
        } catch let error as StoreError where !error.isBatchFailure {
            return .failure(error)
        } catch let error as SQLiteError where error.primaryCode == SQLITE_CONSTRAINT {
            // SQLite undid the failing statement; the operation's earlier statements, if
            // any, cannot fail on a constraint, so nothing of it remains.
            return .failure(.database(error.description))
        } catch let error as StoreError {
            throw error
        } catch let error as SQLiteError {
            throw StoreError(error)
        } catch {
            throw StoreError.database("\(error)")
        }
    }

    private func step(_ statement: SQLiteStatement) throws(StoreError) {
        defer { statement.reset() }
        do {
            try statement.step()
        } catch {
            throw StoreError(error)
        }
    }

    /// `PRAGMA integrity_check` on the writer's connection (for tests and `imagent` diagnostics).
    func integrityCheck() throws(StoreError) -> [String] {
        do {
            return try database.integrityCheck()
        } catch {
            throw StoreError(error)
        }
    }
}
