/// When a link that is up but *suspected* should give way to a new
/// connection: the probe beside a suspected link (issue 12).
///
/// A partition shorter than the heartbeat's death detection (about 7 s on a
/// fast path) never drops the link: when the path heals, the old connection
/// still waits on the kernel's retransmission timer, which doubled through
/// the partition (200 ms, 400 ms, … 3.2 s), so the next segment may leave
/// seconds later, and Linux has no call that makes a socket retransmit now.
/// So while the link is suspected, the daemon keeps one cheap TCP connect to
/// the same server address in flight, and the first one that gets through
/// *after a probe got no answer at all* proves the path is back: the link
/// state machine then closes the old connection and connects again at once
/// (TLS, LOGIN and the resume once, on the new connection; the resume keeps
/// every message exactly once). The probe's own socket is closed as soon as
/// it connects: it carries nothing.
///
/// | step | rule |
/// |------|------|
/// | suspected | something owed a reply (DATA, OPEN or a PING) went unanswered, with nothing received, for the RTT's ACK deadline (1–15 s; 1 s on a fast path) |
/// | probing | one connect at a time, its deadline drawn from `[probe, 2 × probe]` (1–2 s), the next one 50–100 ms after a silent one (`ReconnectPolicy`'s probe timing) |
/// | path back | a probe connected after an earlier probe got no answer at all (every SYN of it lost): the link is replaced |
/// | path fine | the first probe connected (even after a resent SYN: one lost SYN is what a lossy path does), or a probe was refused: the silence is not proved to be the path's; probing ends and the heartbeat decides |
/// | cleared | any frame received, or the link gone: probing ends; a probe in flight is disowned (closed if it connects, else it ends at its deadline) |
///
/// Pure: the I/O layer (`PathProber`) arms the one timer it is told to
/// (replacing the armed one; it reports the firing by `TimerID`) and
/// reports each probe's outcome.
struct PathProbe<Random: RandomNumberGenerator> {
    struct TimerID: Hashable, Sendable, CustomStringConvertible {
        fileprivate var value: UInt64
        var description: String { "path-probe-timer-\(value)" }
    }

    struct ProbeID: Hashable, Sendable, CustomStringConvertible {
        fileprivate var value: UInt64
        var description: String { "path-probe-\(value)" }
    }

    enum Action: Hashable, Sendable {
        /// Arm the probe timer at `deadline`, replacing any armed one.
        case armTimer(TimerID, deadline: MonotonicInstant)
        /// Start a TCP connect to the link's server address with this deadline.
        case connect(ProbeID, deadline: Duration)
        /// Disown the probe: its result no longer counts.
        case abandon(ProbeID)
        /// The path is back while the link waits on TCP's retransmission:
        /// replace the link.
        case pathBack(reason: String)
    }

    enum Outcome: Hashable, Sendable {
        /// SYN-ACK: the server's host answered, `after` the connect began.
        case connected(after: Duration)
        /// No answer: the deadline passed, or a router said unreachable.
        case silent
        /// RST: the host is there and refused.
        case refused
    }

    private enum State {
        /// Nothing owed, or the link is down.
        case idle
        /// Suspected: the first probe at `due`.
        case waiting(due: MonotonicInstant)
        case probing(ProbeID, startedAt: MonotonicInstant, deadline: Duration, sawSilence: Bool)
        case pausing(due: MonotonicInstant, sawSilence: Bool)
        /// The path answered (or the link was replaced): nothing more to
        /// prove until the suspicion clears.
        case settled
    }

    let reconnect: ReconnectPolicy
    private var state: State = .idle
    /// The timer last armed and not yet fired. It is never cancelled: a busy
    /// link owes and gets replies many times a second, and a timer that
    /// fires early just re-arms for the current due time (no churn per frame).
    private var armed: (id: TimerID, deadline: MonotonicInstant)?
    private var random: Random
    private var nextTimer: UInt64 = 1
    private var nextProbe: UInt64 = 1

    /// `reconnect` gives the probe timing (`[reconnect] probe_ms`).
    init(reconnect: ReconnectPolicy.Configuration, random: Random) {
        self.reconnect = ReconnectPolicy(configuration: reconnect)
        self.random = random
    }

    /// Whether a probe is in flight or due.
    var active: Bool {
        switch state {
        case .waiting, .probing, .pausing: true
        case .idle, .settled: false
        }
    }

    /// The link owes a reply since `since` (nil: nothing owed, or a frame
    /// arrived); `ackDeadline` is the RTT's. Called whenever that may have
    /// changed; cheap when nothing did.
    mutating func replyOwed(since: MonotonicInstant?, ackDeadline: Duration, now: MonotonicInstant) -> [Action] {
        guard let since else { return cleared() }
        guard case .idle = state else { return [] }
        let due = max(now, since + ackDeadline)
        state = .waiting(due: due)
        return arm(due)
    }

    /// The link is gone or a frame arrived: stop probing.
    mutating func cleared() -> [Action] {
        defer { state = .idle }
        if case .probing(let probe, _, _, _) = state { return [.abandon(probe)] }
        return []
    }

    mutating func timerFired(_ id: TimerID, now: MonotonicInstant) -> [Action] {
        guard let armed, armed.id == id else { return [] }
        self.armed = nil
        switch state {
        case .waiting(let due):
            return now < due ? arm(due) : startProbe(sawSilence: false, now: now)
        case .pausing(let due, let sawSilence):
            return now < due ? arm(due) : startProbe(sawSilence: sawSilence, now: now)
        case .idle, .probing, .settled:
            return []
        }
    }

    mutating func probeEnded(_ id: ProbeID, _ outcome: Outcome, now: MonotonicInstant) -> [Action] {
        guard case .probing(let probe, let startedAt, let deadline, let sawSilence) = state, probe == id else { return [] }
        switch outcome {
        case .connected(let after):
            state = .settled
            // A first probe that needed a resent SYN proves nothing a lossy
            // path does not also do (the chaos suite's 30 % loss did it);
            // a whole probe without an answer does.
            guard sawSilence else { return [] }
            return [.pathBack(reason: "path back: a probe connected in \(after) after one got no answer, while the link was silent")]
        case .refused:
            state = .settled
            return []
        case .silent:
            let pause = reconnect.probePause(elapsed: now - startedAt, deadline: deadline, using: &random)
            state = .pausing(due: now + pause, sawSilence: true)
            return arm(now + pause)
        }
    }

    private mutating func startProbe(sawSilence: Bool, now: MonotonicInstant) -> [Action] {
        let probe = ProbeID(value: nextProbe)
        nextProbe += 1
        let deadline = reconnect.probeDeadline(using: &random)
        state = .probing(probe, startedAt: now, deadline: deadline, sawSilence: sawSilence)
        return [.connect(probe, deadline: deadline)]
    }

    /// Arms the timer for `deadline` unless the armed one fires by then.
    private mutating func arm(_ deadline: MonotonicInstant) -> [Action] {
        if let armed, armed.deadline <= deadline { return [] }
        let timer = TimerID(value: nextTimer)
        nextTimer += 1
        armed = (timer, deadline)
        return [.armTimer(timer, deadline: deadline)]
    }
}
