/// When to try again after a failure, by what the failure says about the
/// path and the server. Three classes (imagentd(8), RECONNECTING):
///
/// - **Path silent**: a TCP connect got no answer at all (no SYN-ACK, no
///   RST: the stage deadline or the socket's connect timeout passed, or a
///   router reported the host unreachable), or the heartbeat found an
///   established link dead. Nothing says the server is busy, and a SYN costs
///   it next to nothing, so the daemon *probes*: one connect in flight at a
///   time, each with a short deadline drawn from `[probe, 2 × probe]` (1–2 s
///   by default; the kernel's own SYN retransmission backoff never holds the
///   daemon), the next one `probeGap` (50–100 ms) after it. The window does
///   not grow. The first SYN-ACK becomes the real connection; TLS, LOGIN and
///   resume happen once, on it.
/// - **Server refusing**: connection refused or reset, the TLS or HELLO
///   stage failing, LOGIN_FAIL, ERROR, GOAWAY, an established link closed by
///   the peer. Capped exponential backoff with full jitter (the table below);
///   the window grows.
/// - **Server overloaded**: OVERLOADED with RETRY_AFTER_MS. The server's
///   delay is obeyed within `serverDelayFloor`…`serverDelayCap` (a broken
///   server can neither make the daemon spin nor park it for weeks), stretched
///   by up to 20 % and at most 1 s; the window grows.
///
/// The backoff draws every delay uniformly from `[base, window]`; `window`
/// doubles after each counted failure and stops at `cap`. With the defaults
/// (`base` 1 s, `cap` 60 s, `herdSpread` 30 s):
///
/// | what happened                                  | delay drawn from | window after |
/// |------------------------------------------------|------------------|--------------|
/// | 1st refused attempt since the link was stable  | [1 s, 2 s]       | 4 s          |
/// | 2nd refused attempt                            | [1 s, 4 s]       | 8 s          |
/// | 3rd refused attempt                            | [1 s, 8 s]       | 16 s         |
/// | 4th refused attempt                            | [1 s, 16 s]      | 32 s         |
/// | 5th refused attempt                            | [1 s, 32 s]      | 60 s         |
/// | 6th and every later refused attempt            | [1 s, 60 s]      | 60 s         |
/// | an established link was closed by the server   | [1 s, max(30 s, window)] | doubled, ≤ 60 s |
/// | OVERLOADED or GOAWAY with RETRY_AFTER_MS = r   | r clamped to [1 s, 15 min], + ≤ min(20 %, 1 s) | doubled, ≤ 60 s |
/// | GOAWAY without RETRY_AFTER_MS (or 0)           | [1 s, 2 s]       | doubled, ≤ 60 s |
/// | a silent path (probing)                        | next probe after 50–100 ms | unchanged |
/// | TOKEN_EXPIRED                                  | at once          | unchanged    |
/// | the network came up, `imagent reconnect`       | at once          | reset to 2 s |
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
/// `[base, 2 × base]`. A fleet whose *path* died comes back through probing
/// all at once when the path heals; what spreads it then is the server's
/// RETRY_AFTER_MS (the storm simulation in ReconnectPolicyTests).
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
        /// A probe's TCP deadline is drawn from `[probe, 2 × probe]`.
        var probe: Duration

        init(
            base: Duration = .seconds(1),
            cap: Duration = .seconds(60),
            herdSpread: Duration = .seconds(30),
            stablePeriod: Duration = .seconds(30),
            probe: Duration = .seconds(1)
        ) {
            precondition(base > .zero, "the reconnect base must be positive")
            precondition(cap >= base, "the reconnect cap must not be below the base")
            precondition(probe > .zero, "the probe interval must be positive")
            self.base = base
            self.cap = cap
            self.herdSpread = herdSpread.clamped(to: base...cap)
            self.stablePeriod = stablePeriod
            self.probe = probe
        }
    }

    /// What a failure says about the path and the server.
    enum FailureClass: Hashable, Sendable, CustomStringConvertible {
        /// No packet came back: probe at a short interval, no growth.
        case pathSilent
        /// The server (or its host) answered and refused: back off, grow.
        case serverRefusing
        /// The server said OVERLOADED: its RETRY_AFTER_MS, grow.
        case serverOverloaded

        var description: String {
            switch self {
            case .pathSilent: "path silent"
            case .serverRefusing: "server refusing"
            case .serverOverloaded: "server overloaded"
            }
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
    /// …and never by more than this, so an agent is back within its
    /// RETRY_AFTER_MS plus about a second.
    static let serverDelayJitterCap = Duration.seconds(1)
    /// The longest server-given delay obeyed (issue 11, finding 6): a
    /// RETRY_AFTER_MS of 49 days waits 15 minutes. `imagent reconnect`
    /// always connects at once.
    static let serverDelayCap = Duration.seconds(15 * 60)
    /// The pause between a silent probe's end and the next probe, drawn
    /// from this range: a loop that is never busy-waiting, and a status
    /// that shows the wait.
    static let probeGap = Duration.milliseconds(50)...Duration.milliseconds(100)

    let configuration: Configuration
    /// The upper edge of the next full-jitter draw.
    private(set) var window: Duration

    init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        self.window = Self.initialWindow(configuration)
    }

    /// The shortest server-given delay obeyed: a GOAWAY or OVERLOADED with
    /// RETRY_AFTER_MS 0 waits this long, so a server cannot make the daemon spin.
    var serverDelayFloor: Duration { configuration.base }

    /// A connection attempt was refused before the link was established.
    mutating func attemptFailed(using generator: inout some RandomNumberGenerator) -> Duration {
        drawAndGrow(using: &generator)
    }

    /// An established link was closed by the server after being up for
    /// `upFor`. Unless it had become stable, the failure count goes on where
    /// it was.
    mutating func linkLost(upFor: Duration, using generator: inout some RandomNumberGenerator) -> Duration {
        forgiveIfStable(upFor: upFor)
        window = max(window, configuration.herdSpread)
        return drawAndGrow(using: &generator)
    }

    /// An established link was found dead by the heartbeat after being up
    /// for `upFor`: the path is silent, so probing starts at once. A stable
    /// link also forgives earlier failures; the window never grows here.
    mutating func linkDiedSilently(upFor: Duration) {
        forgiveIfStable(upFor: upFor)
    }

    /// The TCP deadline of the next probe, drawn from `[probe, 2 × probe]`.
    func probeDeadline(using generator: inout some RandomNumberGenerator) -> Duration {
        Duration.random(in: configuration.probe...(configuration.probe * 2), using: &generator)
    }

    /// The pause before the next probe after a silent failure `elapsed`
    /// into an attempt whose deadline was `deadline`: `probeGap` after a
    /// deadline that passed; after an early failure (a router's
    /// "unreachable") the rest of a probe interval, so probes never come
    /// faster than one per 1–2 s.
    func probePause(elapsed: Duration, deadline: Duration, using generator: inout some RandomNumberGenerator) -> Duration {
        let period = min(deadline, probeDeadline(using: &generator))
        return max(period - elapsed, Duration.random(in: Self.probeGap, using: &generator))
    }

    /// The server sent GOAWAY (not OVERLOADED): it refuses this link for
    /// now, so the window grows, but the delay is the server's RETRY_AFTER_MS
    /// within the floor and the cap; without one (or 0) it is drawn from
    /// `[floor, 2 × floor]`.
    mutating func serverDirected(retryAfter: Duration?, using generator: inout some RandomNumberGenerator) -> Duration {
        grow()
        return obey(retryAfter, using: &generator)
    }

    /// The server said OVERLOADED (LOGIN_FAIL, GOAWAY or ERROR). With a
    /// RETRY_AFTER_MS the delay obeys it within the floor and the cap; without
    /// one the backoff decides. The window grows either way.
    mutating func overloaded(retryAfter: Duration?, using generator: inout some RandomNumberGenerator) -> Duration {
        guard let retryAfter, retryAfter > .zero else { return drawAndGrow(using: &generator) }
        grow()
        return obey(retryAfter, using: &generator)
    }

    /// Start over, as after a stable link: a usable network appeared (what
    /// failed before says nothing about this network) or the user asked for
    /// a connection. The caller then connects at once.
    mutating func reset() {
        window = Self.initialWindow(configuration)
    }

    /// A server-given delay clamped to `[serverDelayFloor, serverDelayCap]`
    /// and stretched; none (or 0) is drawn from `[floor, 2 × floor]`.
    private func obey(_ retryAfter: Duration?, using generator: inout some RandomNumberGenerator) -> Duration {
        let floor = serverDelayFloor
        guard let retryAfter, retryAfter > .zero else {
            return Duration.random(in: floor...(floor * 2), using: &generator)
        }
        return Self.stretch(retryAfter.clamped(to: floor...max(floor, Self.serverDelayCap)), using: &generator)
    }

    private mutating func forgiveIfStable(upFor: Duration) {
        if upFor >= configuration.stablePeriod {
            window = Self.initialWindow(configuration)
        }
    }

    private mutating func drawAndGrow(using generator: inout some RandomNumberGenerator) -> Duration {
        let delay = Duration.random(in: configuration.base...window, using: &generator)
        grow()
        return delay
    }

    private mutating func grow() {
        window = min(configuration.cap, window * 2)
    }

    private static func initialWindow(_ configuration: Configuration) -> Duration {
        min(configuration.cap, configuration.base * 2)
    }

    private static func stretch(_ delay: Duration, using generator: inout some RandomNumberGenerator) -> Duration {
        let most = min(delay * serverDelayJitter, serverDelayJitterCap)
        return delay + most * Double.random(in: 0...1, using: &generator)
    }
}
