/// Smoothed round-trip time from PING/PONG samples, as RFC 6298 (section 2)
/// computes it for TCP's retransmission timer:
///
///     first sample R:  SRTT = R,  RTTVAR = R / 2
///     each next R:     RTTVAR = 3/4 RTTVAR + 1/4 |SRTT − R|
///                      SRTT   = 7/8 SRTT   + 1/8 R
///
/// The PONG deadline is the RFC's RTO, `SRTT + 4 × RTTVAR`, plus a fixed
/// margin for the server's own scheduling, clamped to `[3 s, 15 s]`: below
/// 3 s a busy server or a brief stall would be called a dead link, above 15 s
/// a dead link keeps its clients waiting too long. Before any sample the
/// deadline is the upper bound, because a guess must not kill a link.
///
/// The ACK deadline (how long a sender waits for any answer before it
/// suspects the link and PINGs) is the same RTO with a smaller margin, clamped
/// to `[1 s, 15 s]`: a false suspicion costs only a PING.
///
/// | SRTT   | RTTVAR | PONG deadline          |
/// |--------|--------|------------------------|
/// | none   | none   | 15 s                   |
/// | 5 ms   | 2 ms   | 3 s (floor)            |
/// | 400 ms | 100 ms | 3 s (0.8 s + 1 s margin, floored) |
/// | 2 s    | 1 s    | 7 s                    |
/// | 5 s    | 3 s    | 15 s (ceiling)         |
struct RTTEstimator: Hashable, Sendable {
    static let pongMargin: Duration = .seconds(1)
    static let pongDeadlineBounds: ClosedRange<Duration> = .seconds(3)...(.seconds(15))

    private(set) var smoothed: Duration?
    private(set) var variation: Duration?
    /// Samples taken and the last of them, for the RTT histogram.
    private(set) var samples = 0
    private(set) var latest: Duration?

    mutating func add(sample: Duration) {
        samples += 1
        latest = sample
        guard let smoothed, let variation else {
            self.smoothed = sample
            self.variation = sample / 2
            return
        }
        let deviation = smoothed > sample ? smoothed - sample : sample - smoothed
        self.variation = variation * 3 / 4 + deviation / 4
        self.smoothed = smoothed * 7 / 8 + sample / 8
    }

    static let ackMargin: Duration = .milliseconds(500)
    static let ackDeadlineBounds: ClosedRange<Duration> = .seconds(1)...(.seconds(15))

    /// How long to wait for a PONG before counting its PING as lost.
    var pongDeadline: Duration {
        guard let smoothed, let variation else { return Self.pongDeadlineBounds.upperBound }
        return (smoothed + variation * 4 + Self.pongMargin).clamped(to: Self.pongDeadlineBounds)
    }

    /// How long a frame owed a reply (DATA, OPEN) may go unanswered, with
    /// nothing else received either, before the link is suspected.
    var ackDeadline: Duration {
        guard let smoothed, let variation else { return Self.ackDeadlineBounds.upperBound }
        return (smoothed + variation * 4 + Self.ackMargin).clamped(to: Self.ackDeadlineBounds)
    }
}
