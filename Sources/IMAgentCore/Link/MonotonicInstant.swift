/// A point on the daemon's monotonic clock (CLOCK_MONOTONIC on Linux), as a
/// plain value.
///
/// The link cores never read a clock: every event carries the instant it
/// happened at, and every timer they ask for carries an absolute deadline.
/// That is what lets tests run hours of simulated link life in microseconds,
/// and what lets the I/O layer decide which real clock backs the values.
struct MonotonicInstant: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Time since the clock's arbitrary origin (boot, for CLOCK_MONOTONIC).
    var sinceOrigin: Duration

    init(sinceOrigin: Duration) {
        self.sinceOrigin = sinceOrigin
    }

    static func < (lhs: MonotonicInstant, rhs: MonotonicInstant) -> Bool {
        lhs.sinceOrigin < rhs.sinceOrigin
    }

    static func + (lhs: MonotonicInstant, rhs: Duration) -> MonotonicInstant {
        MonotonicInstant(sinceOrigin: lhs.sinceOrigin + rhs)
    }

    static func - (lhs: MonotonicInstant, rhs: MonotonicInstant) -> Duration {
        lhs.sinceOrigin - rhs.sinceOrigin
    }

    var description: String { "t+\(sinceOrigin)" }
}

extension Duration {
    /// Whole nanoseconds, truncated. Every duration the link cores handle is
    /// far inside the ±292 years an `Int64` of nanoseconds covers.
    var wholeNanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    /// A duration drawn uniformly from `range`, at nanosecond resolution.
    static func random(
        in range: ClosedRange<Duration>,
        using generator: inout some RandomNumberGenerator
    ) -> Duration {
        let nanoseconds = Int64.random(
            in: range.lowerBound.wholeNanoseconds...range.upperBound.wholeNanoseconds,
            using: &generator
        )
        return .nanoseconds(nanoseconds)
    }

    /// `self` limited to `range`.
    func clamped(to range: ClosedRange<Duration>) -> Duration {
        Swift.min(Swift.max(self, range.lowerBound), range.upperBound)
    }
}
