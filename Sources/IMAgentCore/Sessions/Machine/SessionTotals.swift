/// Counts since the daemon started, for METRICS and STATUS, and the place of each DATA
/// written; only ever incremented.
struct SessionTotals {
    /// SENDs accepted (stored).
    var accepted = 0
    /// Inbound messages stored (duplicates not).
    var received = 0
    /// DATA written again on a later link.
    var resent = 0
    /// MESSAGEs handed to a client again.
    var redelivered = 0
    /// Sessions the server refused (OPEN_FAIL, a broker's PUBACK refusal).
    var refused = 0
    /// Sessions quarantined (`PoisonWatch`).
    var quarantined = 0
    /// DATA frames written on links: each one's place, for `PoisonWatch.culprit`.
    var dataWritten: UInt64 = 0
}
