/// How much of the past the store keeps.
public enum StoreLimits {
    /// Rows of closed sessions kept (so their ids are refused, not reused).
    public static let closedSessionsKept = 10_000
    /// Pruning runs once per this many closes: the table holds at most the sum.
    public static let closedSessionsPruneEvery = 1_000
}
