/// How long to wait before the next connection attempt: capped exponential
/// backoff with **full jitter**, never giving up.
///
/// Every delay is drawn uniformly from `[base, window]`; `window` doubles
/// after each counted failure and stops at `cap`. With the defaults
/// (`base` 1 s, `cap` 60 s, `herdSpread` 30 s):
///
/// | what happened                                  | delay drawn from | window after |
/// |------------------------------------------------|------------------|--------------|
/// | 1st failed attempt since the link was stable   | [1 s, 2 s]       | 4 s          |
/// | 2nd failed attempt                             | [1 s, 4 s]       | 8 s          |
/// | 3rd failed attempt                             | [1 s, 8 s]       | 16 s         |
/// | 4th failed attempt                             | [1 s, 16 s]      | 32 s         |
/// | 5th failed attempt                             | [1 s, 32 s]      | 60 s         |
/// | 6th and every later failed attempt             | [1 s, 60 s]      | 60 s         |
/// | an established link was lost                   | [1 s, max(30 s, window)] | doubled, ≤ 60 s |
/// | GOAWAY, or OVERLOADED with RETRY_AFTER_MS = r  | [r, 1.2 r], at least 1 s for OVERLOADED | unchanged (GOAWAY), doubled (LOGIN_FAIL) |
/// | GOAWAY without RETRY_AFTER_MS, TOKEN_EXPIRED   | at once          | unchanged    |
/// | the network came up                           | at once          | reset to 2 s |
///
/// The window goes back to `2 × base` only once a link has stayed up for
/// `stablePeriod` (30 s): a server that accepts LOGIN and drops the link a
/// second later must not be hammered at the base rate.
///
/// **Why full jitter, and why a herd spread.** Decorrelated jitter
/// (`min(cap, random(base, 3 × previous))`) and full jitter spread a lone
/// agent's retries equally well, but what hurts a server is a *fleet* that
/// lost its links at the same instant (a server restart, a load balancer
/// failover). Every agent then walks the same table, so the attempt rate is
/// set by the narrowest early windows: a 10,000-agent simulation of a 20 s
/// outage gives peaks of 6–13 × the minute's mean attempt rate with either
/// scheme started at `[1 s, 2–3 s]`, and the spike lands exactly when the
/// server comes back. Full jitter keeps the table a plain function of the
/// failure count (decorrelated jitter's ranges depend on the previous draw),
/// and its uniform draw over the whole window is what flattens a herd, so the
/// fix is to start the herd-prone case with a wide window: a lost
/// *established* link is the correlated event, so its first retry is drawn
/// from `[base, herdSpread]`. A lone agent pays 15 s on average for that,
/// and only when nothing local explains the loss: a network change
/// resets the policy and reconnects at once. Failures of fresh
/// attempts (at start-up, after a user connect) are uncorrelated and start at
/// `[base, 2 × base]`.
struct ReconnectPolicy: Sendable {
    struct Configuration: Hashable, Sendable {
        /// The shortest delay, except the cases that reconnect at once.
        var base: Duration
        /// The widest window; the policy keeps retrying at this width forever.
        var cap: Duration
        /// The window for the first retry after an established link was lost.
        var herdSpread: Duration
        /// How long a link must stay up before the backoff is forgiven.
        var stablePeriod: Duration

        init(
            base: Duration = .seconds(1),
            cap: Duration = .seconds(60),
            herdSpread: Duration = .seconds(30),
            stablePeriod: Duration = .seconds(30)
        ) {
            precondition(base > .zero, "the reconnect base must be positive")
            precondition(cap >= base, "the reconnect cap must not be below the base")
            self.base = base
            self.cap = cap
            self.herdSpread = herdSpread.clamped(to: base...cap)
            self.stablePeriod = stablePeriod
        }
    }

    /// When the next attempt may start.
    enum Delay: Hashable, Sendable {
        case atOnce
        case after(Duration)
    }

    /// How far a server-given RETRY_AFTER_MS is stretched, at most: a server
    /// that sends the same value to all its agents must not get them all back
    /// in the same millisecond.
    static let serverDelayJitter = 0.2

    let configuration: Configuration
    /// The upper edge of the next full-jitter draw.
    private(set) var window: Duration

    init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        self.window = Self.initialWindow(configuration)
    }

    /// A connection attempt failed before the link was established.
    mutating func attemptFailed(using generator: inout some RandomNumberGenerator) -> Duration {
        drawAndGrow(using: &generator)
    }

    /// An established link was lost after being up for `upFor`. Unless it had
    /// become stable, the failure count goes on where it was.
    mutating func linkLost(upFor: Duration, using generator: inout some RandomNumberGenerator) -> Duration {
        if upFor >= configuration.stablePeriod {
            window = Self.initialWindow(configuration)
        }
        window = max(window, configuration.herdSpread)
        return drawAndGrow(using: &generator)
    }

    /// The server told this agent to go (GOAWAY) or its token expired: not a
    /// failure, so the window does not grow. `retryAfter` is the server's
    /// RETRY_AFTER_MS; zero means at once.
    func serverDirected(retryAfter: Duration, using generator: inout some RandomNumberGenerator) -> Delay {
        guard retryAfter > .zero else { return .atOnce }
        return .after(Self.stretch(retryAfter, using: &generator))
    }

    /// The server said OVERLOADED. With a RETRY_AFTER_MS the delay honours it
    /// (stretched by up to 20 %) and is never below `base`; without one the
    /// backoff decides. `countsAsFailure` is true for LOGIN_FAIL (the attempt
    /// failed, the window grows) and false for GOAWAY (not a failure).
    mutating func overloaded(
        retryAfter: Duration?,
        countsAsFailure: Bool,
        using generator: inout some RandomNumberGenerator
    ) -> Duration {
        let backoff: Duration
        if countsAsFailure {
            backoff = drawAndGrow(using: &generator)
        } else {
            backoff = Duration.random(in: configuration.base...window, using: &generator)
        }
        guard let retryAfter, retryAfter > .zero else { return backoff }
        return max(configuration.base, Self.stretch(retryAfter, using: &generator))
    }

    /// Start over, as after a stable link: a usable network appeared (what
    /// failed before says nothing about this network) or the user asked for
    /// a connection. The caller then connects at once.
    mutating func reset() {
        window = Self.initialWindow(configuration)
    }

    private mutating func drawAndGrow(using generator: inout some RandomNumberGenerator) -> Duration {
        let delay = Duration.random(in: configuration.base...window, using: &generator)
        window = min(configuration.cap, window * 2)
        return delay
    }

    private static func initialWindow(_ configuration: Configuration) -> Duration {
        min(configuration.cap, configuration.base * 2)
    }

    private static func stretch(_ delay: Duration, using generator: inout some RandomNumberGenerator) -> Duration {
        delay + delay * Double.random(in: 0...serverDelayJitter, using: &generator)
    }
}
