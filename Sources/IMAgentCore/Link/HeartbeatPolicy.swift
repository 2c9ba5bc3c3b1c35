/// When to PING the server and when a missing PONG means the link is dead
/// (wire.md section 7): a Mars-style smart heartbeat.
///
/// **The interval.** A PING goes out only after `interval` without any frame
/// in either direction: a received frame proves the link alive, a sent frame
/// refreshes the NAT mappings on the path, so traffic makes PINGs needless
/// (a link that only sends learns of trouble from an overdue reply, below).
/// The interval is computed afresh for each idle cycle:
///
/// | step | rule                                                            | default      |
/// |------|-----------------------------------------------------------------|--------------|
/// | 1    | the NAT interval: probed upward, pinned after a death (`NATProber`) | starts 15 s |
/// | 2    | while a client has a session open: at most `activeCeiling`, then scaled by `LinkQuality` (1, 3/4, 1/2, 1/4) | 120 s |
/// | 3    | clamped to `bounds`, whose top is lowered to the server's HEARTBEAT_MS (the server may close a link silent for 3 × HEARTBEAT_MS) | 15–300 s |
/// | 4    | jittered ±10 % so a fleet that reconnected together does not PING together, then clamped again | |
///
/// So with no session open (idle mode) only the NAT and the server limit the
/// interval, and it climbs toward `max`; with sessions open a dead link delays
/// messages, so the interval is capped and shrinks on a slow or lossy path.
/// A 5 ms path keeps the full active interval (120 s once probing got there);
/// a 400 ms path is "fair" and PINGs at half of it.
///
/// **Death.** A PING's deadline comes from the smoothed RTT (`RTTEstimator`,
/// 3–15 s). A PONG missing at its deadline counts as a lost PING (it feeds the
/// loss ratio) and another PING goes out at once; when `lossesBeforeDead` (2)
/// PINGs in a row went unanswered with no frame received in between, the
/// link is declared dead. Any frame received meanwhile ends the suspicion.
///
/// **Suspicion.** A reply overdue, a network change, or a resume from suspend
/// sends a PING at once (unless one is already outstanding). A reply is
/// overdue when a frame that the server must answer (DATA with its ACK, OPEN
/// with OPEN_OK) went out and nothing at all came back within the RTT's ACK
/// deadline (1–15 s): a dead link that only sends is then found within about
/// ACK deadline + 2 PONG deadlines (7 s on a fast path) instead of after a
/// whole heartbeat interval, since its own sends keep the idle timer from
/// ever firing.
///
/// The policy keeps one timer: the I/O layer arms it as told (replacing the
/// previous one) and reports it by ID; a firing with an older ID is stale and
/// ignored, so the I/O layer need not cancel anything when a link closes.
struct HeartbeatPolicy<Random: RandomNumberGenerator> {
    struct Configuration: Hashable, Sendable {
        /// The NAT prober's settings, including the interval bounds.
        var nat: NATProber.Configuration
        /// The longest interval while a client has a session open.
        var activeCeiling: Duration
        /// Unanswered PINGs in a row that declare the link dead.
        var lossesBeforeDead: Int

        init(
            bounds: ClosedRange<Duration> = .seconds(15)...(.seconds(300)),
            activeCeiling: Duration = .seconds(120),
            probeStep: Duration = .seconds(30),
            successesPerStep: Int = 3,
            pinDuration: Duration = .seconds(6 * 3600),
            lossesBeforeDead: Int = 2
        ) {
            precondition(lossesBeforeDead > 0, "a link is declared dead after at least one lost PING")
            self.nat = NATProber.Configuration(
                bounds: bounds,
                step: probeStep,
                successesPerStep: successesPerStep,
                pinDuration: pinDuration
            )
            self.activeCeiling = activeCeiling
            self.lossesBeforeDead = lossesBeforeDead
        }
    }

    /// Identifies one arming of the heartbeat timer.
    struct TimerID: Hashable, Sendable, CustomStringConvertible {
        fileprivate var value: UInt64
        var description: String { "heartbeat-timer-\(value)" }
    }

    enum Action: Hashable, Sendable {
        case none
        /// Arm the heartbeat timer at `deadline`, replacing any armed one.
        case armTimer(TimerID, deadline: MonotonicInstant)
        /// Send PING with this seq now, and arm the heartbeat timer for its PONG.
        case sendPing(id: UInt64, timer: TimerID, pongDeadline: MonotonicInstant)
        /// The link is dead: close it (the link state machine hears `heartbeatTimedOut`).
        case linkDead(reason: String)
    }

    private struct Ping {
        var id: UInt64
        var sentAt: MonotonicInstant
        /// Silence before the first PING of this suspicion episode.
        var idleGap: Duration
        /// PINGs of this episode that already went unanswered.
        var lostBefore: Int
    }

    private enum Waiting {
        /// For `interval` of silence after the last frame.
        case idle(interval: Duration)
        /// For the PONG of the outstanding PING.
        case pong
    }

    private struct Up {
        var lastReceived: MonotonicInstant
        var lastSent: MonotonicInstant
        var timer: TimerID
        var waiting: Waiting
        /// When the first frame owed a reply went out since the last frame
        /// received; nil when nothing is owed.
        var replyAwaitedSince: MonotonicInstant?
        /// The last PING sent; kept after other traffic ended the wait, so a
        /// late PONG still yields an RTT sample.
        var outstanding: Ping?

        var lastTraffic: MonotonicInstant { max(lastReceived, lastSent) }
    }

    private enum State {
        case down
        case up(Up)
    }

    let configuration: Configuration
    private var state: State = .down
    private var random: Random
    private(set) var rtt = RTTEstimator()
    private var losses = PingLossWindow()
    private(set) var nat: NATProber
    private var sessionsActive = false
    private var serverCeiling: Duration?
    private var nextPingID: UInt64 = 1
    private var nextTimer: UInt64 = 1

    init(configuration: Configuration = Configuration(), random: Random) {
        self.configuration = configuration
        self.random = random
        self.nat = NATProber(configuration: configuration.nat)
    }

    var quality: LinkQuality {
        LinkQuality(smoothedRTT: rtt.smoothed, lossRatio: losses.lossRatio)
    }

    /// The interval before jitter, from the table above.
    var interval: Duration {
        var target = nat.interval
        if sessionsActive {
            target = min(target, configuration.activeCeiling) * quality.intervalScale
        }
        return target.clamped(to: bounds)
    }

    /// Since when the oldest frame still owed a reply went out (DATA or OPEN
    /// since the last frame received, or the outstanding PING); nil when
    /// nothing is owed or the link is down. The path probe's clock.
    var replyOwedSince: MonotonicInstant? {
        guard case .up(let up) = state else { return nil }
        guard case .pong = up.waiting, let ping = up.outstanding else { return up.replyAwaitedSince }
        return min(up.replyAwaitedSince ?? ping.sentAt, ping.sentAt)
    }

    /// The configured bounds with the server's HEARTBEAT_MS as the ceiling;
    /// the server's word wins even below the configured minimum, but never
    /// below `serverCeilingFloor`.
    private var bounds: ClosedRange<Duration> {
        let configured = configuration.nat.bounds
        let top = min(configured.upperBound, serverCeiling ?? configured.upperBound)
        return min(configured.lowerBound, top)...top
    }

    /// The shortest interval a server's HEARTBEAT_MS can impose (issue 11,
    /// finding 6): a HEARTBEAT_MS of 0 or 1 means one PING a second at most,
    /// so a broken server cannot make the daemon spin.
    static var serverCeilingFloor: Duration { .seconds(1) }

    // MARK: Events

    /// LOGIN_OK arrived: the link is up. `serverCeiling` is its HEARTBEAT_MS.
    mutating func linkEstablished(serverCeiling: Duration?, now: MonotonicInstant) -> Action {
        self.serverCeiling = serverCeiling.map { max($0, Self.serverCeilingFloor) }
        let timer = makeTimerID()
        let interval = jitteredInterval()
        state = .up(Up(lastReceived: now, lastSent: now, timer: timer, waiting: .idle(interval: interval)))
        return .armTimer(timer, deadline: now + interval)
    }

    /// Any frame arrived: proof of life.
    mutating func frameReceived(now: MonotonicInstant) -> Action {
        switch state {
        case .down:
            return .none
        case .up(var up):
            return proofOfLife(&up, now: now)
        }
    }

    /// Any frame was written; `awaitsReply` when the server must answer it
    /// (DATA, OPEN). Only the first such frame after a receipt arms a timer.
    mutating func frameSent(now: MonotonicInstant, awaitsReply: Bool = false) -> Action {
        switch state {
        case .down:
            return .none
        case .up(var up):
            up.lastSent = now
            guard awaitsReply, up.replyAwaitedSince == nil else {
                state = .up(up)
                return .none
            }
            up.replyAwaitedSince = now
            guard case .idle(let interval) = up.waiting else {
                state = .up(up)
                return .none
            }
            up.timer = makeTimerID()
            state = .up(up)
            return .armTimer(up.timer, deadline: idleDue(up, interval: interval))
        }
    }

    /// A PONG with seq `id` arrived.
    mutating func pongReceived(id: UInt64, now: MonotonicInstant) -> Action {
        switch state {
        case .down:
            return .none
        case .up(var up):
            if let ping = up.outstanding, ping.id == id {
                rtt.add(sample: now - ping.sentAt)
                losses.record(lost: false)
                nat.pingAnswered(afterIdleGap: ping.idleGap, now: now)
                up.outstanding = nil
            }
            return proofOfLife(&up, now: now)
        }
    }

    /// The heartbeat timer armed with `id` fired.
    mutating func timerFired(_ id: TimerID, now: MonotonicInstant) -> Action {
        switch state {
        case .down:
            return .none
        case .up(var up):
            guard up.timer == id else { return .none }
            switch up.waiting {
            case .idle(let interval):
                let due = idleDue(up, interval: interval)
                guard now >= due else {
                    up.timer = makeTimerID()
                    state = .up(up)
                    return .armTimer(up.timer, deadline: due)
                }
                return sendPing(&up, idleGap: now - up.lastTraffic, lostBefore: 0, now: now)
            case .pong:
                guard let lost = up.outstanding else {
                    preconditionFailure("waiting for a PONG means a PING is outstanding")
                }
                losses.record(lost: true)
                let lostInARow = lost.lostBefore + 1
                guard lostInARow < configuration.lossesBeforeDead else {
                    nat.linkDied(afterIdleGap: lost.idleGap, now: now)
                    state = .down
                    return .linkDead(reason: "\(lostInARow) PINGs in a row unanswered, no frame received")
                }
                return sendPing(&up, idleGap: lost.idleGap, lostBefore: lostInARow, now: now)
            }
        }
    }

    /// A round trip measured outside PING/PONG (HELLO sent → HELLO_OK
    /// received), so the first PONG deadline already fits the path instead of
    /// the 15 s a link without samples gets.
    mutating func seedRTT(sample: Duration) {
        rtt.add(sample: sample)
    }

    /// The machine slept (see `SuspendDetector`): NAT mappings may be gone.
    mutating func resumedFromSuspend(now: MonotonicInstant) -> Action {
        suspect(now: now)
    }

    /// Addresses or routes changed: what was learnt about the path is void.
    mutating func networkChanged(now: MonotonicInstant) -> Action {
        nat.networkChanged()
        rtt = RTTEstimator()
        losses = PingLossWindow()
        return suspect(now: now)
    }

    /// Whether any local client has a session open (idle mode when not).
    mutating func sessionsActive(_ active: Bool, now: MonotonicInstant) -> Action {
        guard active != sessionsActive else { return .none }
        sessionsActive = active
        switch state {
        case .down:
            return .none
        case .up(var up):
            switch up.waiting {
            case .idle:
                return restartIdleCycle(&up, from: up.lastTraffic)
            case .pong:
                return .none
            }
        }
    }

    /// The connection closed without the policy declaring it dead.
    mutating func connectionLost(now: MonotonicInstant) -> Action {
        switch state {
        case .down:
            return .none
        case .up(let up):
            let gap: Duration
            switch up.waiting {
            case .idle:
                gap = now - up.lastTraffic
            case .pong:
                guard let ping = up.outstanding else {
                    preconditionFailure("waiting for a PONG means a PING is outstanding")
                }
                gap = ping.idleGap
            }
            nat.linkDied(afterIdleGap: gap, now: now)
            state = .down
            return .none
        }
    }

    // MARK: Helpers

    private mutating func suspect(now: MonotonicInstant) -> Action {
        switch state {
        case .down:
            return .none
        case .up(var up):
            switch up.waiting {
            case .idle:
                return sendPing(&up, idleGap: now - up.lastTraffic, lostBefore: 0, now: now)
            case .pong:
                return .none
            }
        }
    }

    private mutating func sendPing(
        _ up: inout Up,
        idleGap: Duration,
        lostBefore: Int,
        now: MonotonicInstant
    ) -> Action {
        let id = nextPingID
        nextPingID += 1
        up.outstanding = Ping(id: id, sentAt: now, idleGap: idleGap, lostBefore: lostBefore)
        up.lastSent = now
        up.waiting = .pong
        up.timer = makeTimerID()
        state = .up(up)
        return .sendPing(id: id, timer: up.timer, pongDeadline: now + rtt.pongDeadline)
    }

    /// Something arrived from the server: no reply is awaited any more, and a PONG wait ends
    /// in a new idle cycle. While idle, the armed timer re-arms itself from the new
    /// last-traffic time when it fires: no timer churn per frame.
    private mutating func proofOfLife(_ up: inout Up, now: MonotonicInstant) -> Action {
        up.lastReceived = now
        up.replyAwaitedSince = nil
        switch up.waiting {
        case .idle:
            state = .up(up)
            return .none
        case .pong:
            return restartIdleCycle(&up, from: now)
        }
    }

    private mutating func restartIdleCycle(_ up: inout Up, from start: MonotonicInstant) -> Action {
        let interval = jitteredInterval()
        up.waiting = .idle(interval: interval)
        up.timer = makeTimerID()
        state = .up(up)
        return .armTimer(up.timer, deadline: min(start + interval, idleDue(up, interval: interval)))
    }

    /// When an idle link PINGs: after `interval` of silence, or earlier when
    /// a reply it is owed is overdue.
    private func idleDue(_ up: Up, interval: Duration) -> MonotonicInstant {
        let silent = up.lastTraffic + interval
        guard let awaited = up.replyAwaitedSince else { return silent }
        return min(silent, awaited + rtt.ackDeadline)
    }

    private mutating func jitteredInterval() -> Duration {
        let scale = Double.random(in: (1 - NATProber.intervalJitter)...(1 + NATProber.intervalJitter), using: &random)
        return (interval * scale).clamped(to: bounds)
    }

    private mutating func makeTimerID() -> TimerID {
        defer { nextTimer += 1 }
        return TimerID(value: nextTimer)
    }
}

extension HeartbeatPolicy: Sendable where Random: Sendable {}
