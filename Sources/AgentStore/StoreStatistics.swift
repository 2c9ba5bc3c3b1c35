/// Counters of the writer's work since the store was opened, for metrics and
/// for tests that check group commit really batches.
public struct StoreStatistics: Sendable, Hashable {
    /// Transactions committed. Group commit keeps this far below `operations`.
    public var commits: Int = 0
    /// Operations in committed transactions.
    public var operations: Int = 0
    /// Submissions (`perform` calls) in committed transactions.
    public var submissions: Int = 0
    /// Transactions rolled back because SQLite failed (full, I/O, …); every
    /// operation in them failed with that error.
    public var failedCommits: Int = 0
    /// Submissions refused with `StoreError.full`.
    public var fullRejections: Int = 0
    /// The most operations one committed transaction held.
    public var largestBatch: Int = 0

    public init() {}
}

/// Told of every committed transaction, on the writer thread: how long it took
/// (BEGIN to the end of COMMIT, the fsync included at `.power`) and how many
/// operations it held. For a daemon's histograms, without the store knowing of metrics.
public typealias StoreCommitObserver = @Sendable (_ duration: Duration, _ operations: Int) -> Void
