/// When an event happens, as the session layer reads time: it never reads a clock itself.
struct SessionTime: Hashable, Sendable {
    /// Wall-clock time in ms since the Unix epoch: TTL deadlines are absolute and stored with
    /// their messages, so they survive a restart.
    var wallMS: Int64
    /// Monotonic time, for durations (the send → ACK latency).
    var instant: MonotonicInstant

    init(wallMS: Int64, instant: MonotonicInstant) {
        self.wallMS = wallMS
        self.instant = instant
    }
}
