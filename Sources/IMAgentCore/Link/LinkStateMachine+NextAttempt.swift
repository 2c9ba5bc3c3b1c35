import IMLink

/// Deciding the next attempt after a failure: fail over to the next endpoint,
/// probe a silent path, back off from a refusing or overloaded server, follow
/// GOAWAY, and answer each reason code (the table in `LinkStateMachine`'s comment).
extension LinkStateMachine {
    // MARK: Deciding the next attempt

    mutating func forgiveFailures() {
        reconnectPolicy.reset()
        rotation.startNewRound()
        lastFailure = nil
    }

    /// The endpoint failed at its own fault: the next one at once, or after
    /// a full round the next probe (a silent path) or the backoff (a refusal).
    mutating func afterEndpointFailure(
        _ connecting: Connecting,
        _ reason: String,
        pathSilent: Bool = false,
        now: MonotonicInstant? = nil
    ) -> (Next, String) {
        let failed = connecting.endpoint
        lastFailure = pathSilent ? .pathSilent : .serverRefusing
        guard rotation.failed(connecting.target) else {
            let all = "all \(rotation.endpoints.count) endpoints failed"
            guard pathSilent, let now else {
                let delay = reconnectPolicy.attemptFailed(using: &random)
                return (.reconnect(.after(delay)), "\(failed): \(reason); \(all); server refusing, backing off")
            }
            rotation.startNewRound()
            let pause = reconnectPolicy.probePause(
                elapsed: now - connecting.stageSince,
                deadline: connecting.stageDeadline,
                using: &random
            )
            return (.reconnect(.after(pause)), "\(failed): \(reason); \(all); path silent, probing")
        }
        let next = rotation.upcoming
        return (.reconnect(.atOnce), "\(failed): \(reason); failing over to \(next)")
    }

    /// The attempt failed for a reason other than its endpoint.
    mutating func afterAttemptFailure(_ reason: String) -> (Next, String) {
        rotation.startNewRound()
        lastFailure = .serverRefusing
        return (.reconnect(.after(reconnectPolicy.attemptFailed(using: &random))), reason)
    }

    /// An established link was closed or broken by the server's side.
    mutating func afterLinkLost(since: MonotonicInstant, now: MonotonicInstant, _ reason: String) -> (Next, String) {
        rotation.startNewRound()
        lastFailure = .serverRefusing
        let upFor = now - since
        let delay = reconnectPolicy.linkLost(upFor: upFor, using: &random)
        return (.reconnect(.after(delay)), "\(reason) (link was up \(upFor))")
    }

    /// The heartbeat found an established link dead: the path is silent,
    /// so probing starts at once, without growing the backoff.
    mutating func afterLinkDiedSilently(since: MonotonicInstant, now: MonotonicInstant, _ reason: String) -> (Next, String) {
        rotation.startNewRound()
        lastFailure = .pathSilent
        let upFor = now - since
        reconnectPolicy.linkDiedSilently(upFor: upFor)
        return (.reconnect(.atOnce), "\(reason) (link was up \(upFor)); path silent, probing")
    }

    mutating func afterGoaway(code: WireCode, retryAfter: Duration?, redirect: Endpoint?) -> (Next, String) {
        if let redirect {
            rotation.redirect(to: redirect)
        } else {
            rotation.startNewRound()
        }
        lastFailure = code == .overloaded ? .serverOverloaded : .serverRefusing
        let target = redirect.map { " to \($0)" } ?? ""
        guard code != .overloaded else {
            let delay = reconnectPolicy.overloaded(retryAfter: retryAfter, using: &random)
            return (.reconnect(.after(delay)), "GOAWAY \(code); server overloaded, reconnecting\(target)")
        }
        let delay = reconnectPolicy.serverDirected(retryAfter: retryAfter, using: &random)
        return (.reconnect(.after(delay)), "GOAWAY \(code); server refusing, reconnecting\(target)")
    }

    /// The response to a reason code from LOGIN_FAIL or ERROR (wire.md
    /// section 6; the table in the type's comment). `linkUpSince` is set when
    /// the code ended an established link.
    mutating func afterCode(
        _ code: WireCode,
        retryAfter: Duration?,
        linkUpSince: (since: MonotonicInstant, now: MonotonicInstant)?
    ) -> (Next, String) {
        switch code {
        case .versionUnsupported, .forbidden:
            return (.stop(.refused(code)), "no retry until a user connect")
        case .tokenInvalid:
            dropTokenOnNextAttempt = true
            return afterAttemptFailure("dropping the token")
        case .tokenExpired:
            dropTokenOnNextAttempt = true
            rotation.startNewRound()
            lastFailure = nil  // not a failure: a fresh token, at once
            return (.reconnect(.atOnce), "dropping the token, reconnecting at once")
        case .overloaded:
            rotation.startNewRound()
            lastFailure = .serverOverloaded
            let delay = reconnectPolicy.overloaded(retryAfter: retryAfter, using: &random)
            return (.reconnect(.after(delay)), "server overloaded")
        case .frameTooLarge where linkUpSince != nil:
            rotation.startNewRound()
            lastFailure = nil  // our frame was too large, not the server's fault
            return (.reconnect(.atOnce), "reconnecting at once")
        default:
            guard let linkUpSince else { return afterAttemptFailure("backing off") }
            return afterLinkLost(since: linkUpSince.since, now: linkUpSince.now, "backing off")
        }
    }
}
