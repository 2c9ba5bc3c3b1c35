import IMLink

/// An attempt's way from token to HELLO: each stage's result, its deadline
/// passing, and the backoff timer that starts the next attempt.
extension LinkStateMachine {
    // MARK: Timers

    /// The stage deadline armed as `timer` passed: the stage failed.
    mutating func stageDeadlinePassed(_ timer: LinkTimerID, now: MonotonicInstant) -> [LinkAction] {
        switch state {
        case .connecting(let connecting) where connecting.stageTimer == timer:
            let reason = "\(connecting.stage) stage timed out after \(connecting.stageDeadline)"
            let (next, why) =
                switch connecting.stage {
                case .token: afterAttemptFailure(reason)
                // No SYN-ACK and no RST within the deadline: nothing came back.
                case .tcp: afterEndpointFailure(connecting, reason, pathSilent: true, now: now)
                case .resolve, .tls, .hello, .login: afterEndpointFailure(connecting, reason)
                }
            return end(connecting, cancelTimer: false, sendError: nil, next: next, reason: why, now: now)
        case .stopped, .disconnected, .connecting, .connected, .disconnecting:
            return [.ignored(reason: "stale stage deadline \(timer) while \(phase)")]
        }
    }

    /// The backoff armed as `timer` elapsed: try again.
    mutating func backoffElapsed(_ timer: LinkTimerID, now: MonotonicInstant) -> [LinkAction] {
        switch state {
        case .disconnected(.backoff(let armed, _)) where armed == timer:
            return startAttempt(reason: "backoff elapsed", now: now)
        case .stopped, .disconnected, .connecting, .connected, .disconnecting:
            return [.ignored(reason: "stale backoff timer \(timer) while \(phase)")]
        }
    }

    // MARK: Connect stages

    mutating func tokenObtained(_ attempt: AttemptID, now: MonotonicInstant) -> [LinkAction] {
        guard let connecting = current(attempt, in: .token) else {
            return [.ignored(reason: "token for \(attempt) while \(phase)")]
        }
        return advance(connecting, to: .resolve, reason: "token obtained", now: now, then: .resolve(attempt, connecting.endpoint))
    }

    mutating func resolved(_ attempt: AttemptID, addresses: [ResolvedAddress], now: MonotonicInstant) -> [LinkAction] {
        guard let connecting = current(attempt, in: .resolve) else {
            return [.ignored(reason: "addresses for \(attempt) while \(phase)")]
        }
        guard !addresses.isEmpty else {
            return stageFailed(attempt, stage: .resolve, reason: "no addresses", now: now)
        }
        // A probe has a short deadline, so the kernel's SYN backoff never holds the link.
        let deadline = probing ? min(configuration.stageTimeout, reconnectPolicy.probeDeadline(using: &random)) : configuration.stageTimeout
        return advance(
            connecting,
            to: .tcp,
            deadline: deadline,
            reason: "resolved to \(addresses.count) addresses",
            now: now,
            then: .connectTCP(attempt, addresses, timeout: deadline)
        )
    }

    mutating func tcpConnected(_ attempt: AttemptID, now: MonotonicInstant) -> [LinkAction] {
        guard let connecting = current(attempt, in: .tcp) else {
            return [.ignored(reason: "TCP connected for \(attempt) while \(phase)")]
        }
        guard configuration.tls else {
            return advance(connecting, to: .hello, reason: "TCP connected", now: now, then: .sendHello(attempt))
        }
        return advance(connecting, to: .tls, reason: "TCP connected", now: now, then: .startTLS(attempt, connecting.endpoint))
    }

    mutating func tlsEstablished(_ attempt: AttemptID, now: MonotonicInstant) -> [LinkAction] {
        guard let connecting = current(attempt, in: .tls) else {
            return [.ignored(reason: "TLS established for \(attempt) while \(phase)")]
        }
        return advance(connecting, to: .hello, reason: "TLS established", now: now, then: .sendHello(attempt))
    }

    /// A stage failed and left nothing open (a failed connect or TLS
    /// handshake has released its socket). `pathSilent` when nothing came
    /// back from the server's side (a connect timeout, a router's
    /// "unreachable"), as opposed to a refusal (RST, a TLS alert).
    mutating func stageFailed(
        _ attempt: AttemptID,
        stage: ConnectStage,
        reason: String,
        pathSilent: Bool = false,
        now: MonotonicInstant
    ) -> [LinkAction] {
        guard let connecting = current(attempt, in: stage) else {
            return [.ignored(reason: "\(stage) failure of \(attempt) while \(phase): \(reason)")]
        }
        let detail = "\(stage) failed: \(reason)"
        let (next, why) =
            switch stage {
            case .token: afterAttemptFailure(detail)
            case .resolve, .tcp, .tls, .hello, .login:
                afterEndpointFailure(connecting, detail, pathSilent: pathSilent && stage == .tcp, now: now)
            }
        return [.cancelTimer(connecting.stageTimer)] + proceed(to: next, reason: why, now: now)
    }
}
