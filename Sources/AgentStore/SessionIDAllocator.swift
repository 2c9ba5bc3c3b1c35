/// Draws session ids: random non-zero 64-bit numbers, checked against every id
/// the store has ever used.
///
/// Why random rather than a persisted counter: a counter restarts at 1 when
/// the database is lost or deleted, and the server — which remembers closed
/// sessions — would then see old ids reused (OPEN_FAIL SESSION_CLOSED, or worse,
/// another session's state). A random 64-bit id is fresh with overwhelming
/// probability even across a lost database, and it does not leak how many
/// sessions this machine has opened. Within one database, reuse is ruled out
/// outright: closed sessions keep their row as a tombstone, every draw is
/// checked against the table, and ids drawn for a creation that did not commit
/// are remembered until the process ends.
struct SessionIDAllocator {
    private var generator: any RandomNumberGenerator
    /// Ids handed out but not yet in the sessions table. After a restart they are
    /// forgotten, which is safe: an id never stored was never used.
    private var handedOut: Set<UInt64> = []

    init(generator: any RandomNumberGenerator = SystemRandomNumberGenerator()) {
        self.generator = generator
    }

    /// A non-zero id for which `isUsed` is false and that was not handed out before.
    mutating func draw(isUsed: (UInt64) throws -> Bool) rethrows -> UInt64 {
        while true {
            let candidate = UInt64.random(in: 1...UInt64.max, using: &generator)
            if handedOut.contains(candidate) { continue }
            if try isUsed(candidate) { continue }
            handedOut.insert(candidate)
            return candidate
        }
    }

    /// The id is now stored in the sessions table, which guards it from here on.
    mutating func stored(_ id: UInt64) {
        handedOut.remove(id)
    }
}
