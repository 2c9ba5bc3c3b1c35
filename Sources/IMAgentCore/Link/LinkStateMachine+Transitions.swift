import IMLink

/// The moves between states every event is built from: starting and advancing
/// an attempt, ending or closing it, stopping, and what follows once no
/// connection is left (a new attempt, a backoff, waiting for a network).
extension LinkStateMachine {
    // MARK: Transitions

    mutating func move(to new: State, reason: String) -> LinkAction {
        let old = phase
        state = new
        return .stateChanged(from: old, to: phase, reason: reason)
    }

    private mutating func makeTimer() -> LinkTimerID {
        defer { nextTimer = nextTimer.next }
        return nextTimer
    }

    /// From a state that holds no connection, do what `next` says.
    mutating func proceed(to next: Next, reason: String, now: MonotonicInstant) -> [LinkAction] {
        switch next {
        case .stop(let stopReason):
            return [move(to: .stopped(stopReason), reason: reason)]
        case .waitForNetwork:
            return [move(to: .disconnected(.network), reason: reason)]
        case .reconnect(let delay):
            guard networkAvailable else {
                return [move(to: .disconnected(.network), reason: "\(reason); no network")]
            }
            switch delay {
            case .atOnce:
                return startAttempt(reason: reason, now: now)
            case .after(let wait):
                let timer = makeTimer()
                let until = now + wait
                return [
                    move(to: .disconnected(.backoff(timer: timer, until: until)), reason: "\(reason); retry in \(wait)"),
                    .armTimer(timer, deadline: until, purpose: .backoff),
                ]
            }
        }
    }

    mutating func startAttempt(reason: String, now: MonotonicInstant) -> [LinkAction] {
        let attempt = nextAttempt
        nextAttempt = attempt.next
        let target = rotation.nextTarget()
        let dropCached = dropTokenOnNextAttempt
        dropTokenOnNextAttempt = false
        let connecting = Connecting(
            attempt: attempt,
            target: target,
            endpoint: rotation.endpoint(for: target),
            stage: .token,
            stageTimer: makeTimer(),
            stageSince: now,
            stageDeadline: configuration.stageTimeout
        )
        return [
            move(to: .connecting(connecting), reason: reason),
            .armTimer(connecting.stageTimer, deadline: now + configuration.stageTimeout, purpose: .stageDeadline(.token)),
            .obtainToken(attempt, dropCached: dropCached),
        ]
    }

    mutating func advance(
        _ connecting: Connecting,
        to stage: ConnectStage,
        deadline: Duration? = nil,
        reason: String,
        now: MonotonicInstant,
        then action: LinkAction
    ) -> [LinkAction] {
        var connecting = connecting
        let finishedTimer = connecting.stageTimer
        connecting.stage = stage
        connecting.stageTimer = makeTimer()
        connecting.stageSince = now
        connecting.stageDeadline = deadline ?? configuration.stageTimeout
        return [
            .cancelTimer(finishedTimer),
            move(to: .connecting(connecting), reason: reason),
            .armTimer(connecting.stageTimer, deadline: now + connecting.stageDeadline, purpose: .stageDeadline(stage)),
            action,
        ]
    }

    /// Ends an attempt in progress: abandons it when it holds no socket yet,
    /// else closes its socket and waits in Disconnecting.
    mutating func end(
        _ connecting: Connecting,
        cancelTimer: Bool = true,
        sendError: WireCode?,
        next: Next,
        reason: String,
        now: MonotonicInstant
    ) -> [LinkAction] {
        let cancel: [LinkAction] = cancelTimer ? [.cancelTimer(connecting.stageTimer)] : []
        guard connecting.stage.holdsSocket else {
            return cancel + [.abandonAttempt(connecting.attempt)] + proceed(to: next, reason: reason, now: now)
        }
        return cancel + close(connecting.attempt, sendError: sendError, next: next, reason: reason)
    }

    /// Closes the socket of `attempt` and waits for it in Disconnecting.
    mutating func close(_ attempt: AttemptID, sendError: WireCode?, next: Next, reason: String) -> [LinkAction] {
        [
            move(to: .disconnecting(Disconnecting(attempt: attempt, next: next, reason: reason)), reason: reason),
            .closeConnection(attempt, sendError: sendError),
        ]
    }

    mutating func stop(_ stopReason: StopReason, reason: String, now: MonotonicInstant) -> [LinkAction] {
        switch state {
        case .stopped(.shutdown):
            return [.ignored(reason: "\(reason) after shutdown")]
        case .stopped(let current):
            switch stopReason {
            case .shutdown:
                return [move(to: .stopped(.shutdown), reason: reason)]
            case .notStarted, .userDisconnected, .refused:
                return [.ignored(reason: "\(reason) while stopped (\(current))")]
            }
        case .disconnected(let waiting):
            return cancel(waiting) + [move(to: .stopped(stopReason), reason: reason)]
        case .connecting(let connecting):
            return end(connecting, sendError: nil, next: .stop(stopReason), reason: reason, now: now)
        case .connected(let connected):
            return close(connected.attempt, sendError: nil, next: .stop(stopReason), reason: reason)
        case .disconnecting(var disconnecting):
            return replaceNext(&disconnecting, with: .stop(stopReason), reason: reason)
        }
    }

    mutating func replaceNext(_ disconnecting: inout Disconnecting, with next: Next, reason: String) -> [LinkAction] {
        if case .stop(.shutdown) = disconnecting.next {
            return [.ignored(reason: "\(reason) while disconnecting to shut down")]
        }
        disconnecting.next = next
        disconnecting.reason = reason
        state = .disconnecting(disconnecting)
        return []
    }

    func cancel(_ waiting: Waiting) -> [LinkAction] {
        switch waiting {
        case .backoff(let timer, _): [.cancelTimer(timer)]
        case .network: []
        }
    }

    /// The attempt in progress, when it is `attempt` and in `stage`.
    func current(_ attempt: AttemptID, in stage: ConnectStage) -> Connecting? {
        switch state {
        case .connecting(let connecting) where connecting.attempt == attempt && connecting.stage == stage:
            connecting
        case .stopped, .disconnected, .connecting, .connected, .disconnecting:
            nil
        }
    }

    /// A handshake frame outside its stage: a protocol violation when the
    /// current connection sent it, else a stale frame of a closed one.
    mutating func outOfPhase(_ frame: String, _ attempt: AttemptID, now: MonotonicInstant) -> [LinkAction] {
        protocolViolation(attempt, code: .protocolError, reason: "\(frame) while \(phase)", now: now)
    }
}
