import IMLink

/// The server's frames on session 0 (HELLO_OK, LOGIN_OK, LOGIN_FAIL, GOAWAY with
/// its REDIRECT, ERROR), protocol violations, and the daemon's own store failing
/// under the link: each ends the stage, the link or the attempt as wire.md says.
extension LinkStateMachine {
    // MARK: Frames on session 0

    /// HELLO_OK arrived.
    mutating func helloOK(_ attempt: AttemptID, _ hello: HelloResult, now: MonotonicInstant) -> [LinkAction] {
        guard let connecting = current(attempt, in: .hello) else {
            return outOfPhase("HELLO_OK", attempt, now: now)
        }
        guard configuration.versions.contains(hello.version) else {
            return protocolViolation(
                attempt,
                code: .protocolError,
                reason: "HELLO_OK chose version \(hello.version), outside \(configuration.versions)",
                now: now
            )
        }
        var negotiated = connecting
        negotiated.hello = hello
        return advance(negotiated, to: .login, reason: "HELLO_OK, version \(hello.version)", now: now, then: .sendLogin(attempt))
    }

    /// LOGIN_OK arrived: the link is up. `heartbeat` is its HEARTBEAT_MS.
    mutating func loginOK(_ attempt: AttemptID, heartbeat: Duration?, now: MonotonicInstant) -> [LinkAction] {
        guard let connecting = current(attempt, in: .login) else {
            return outOfPhase("LOGIN_OK", attempt, now: now)
        }
        guard let hello = connecting.hello else {
            preconditionFailure("the login stage is only entered with HELLO_OK's result")
        }
        rotation.startNewRound()
        lastFailure = nil
        let connected = Connected(attempt: attempt, endpoint: connecting.endpoint, since: now, hello: hello)
        return [
            .cancelTimer(connecting.stageTimer),
            move(to: .connected(connected), reason: "LOGIN_OK"),
            .startHeartbeat(attempt, serverCeiling: heartbeat),
            .reopenSessions(attempt),
        ]
    }

    /// LOGIN_FAIL arrived; the server closes after it.
    mutating func loginFail(
        _ attempt: AttemptID,
        code: WireCode,
        retryAfter: Duration?,
        message: String? = nil,
        now: MonotonicInstant
    ) -> [LinkAction] {
        guard let connecting = current(attempt, in: .login) else {
            return outOfPhase("LOGIN_FAIL", attempt, now: now)
        }
        let (next, why) = afterCode(code, retryAfter: retryAfter, linkUpSince: nil)
        // The server's MESSAGE stays in the reason: it is what the log and STATUS show the operator.
        let said = message.map { " (\($0))" } ?? ""
        let ended = end(connecting, sendError: nil, next: next, reason: "LOGIN_FAIL \(code)\(said): \(why)", now: now)
        guard code == .tokenInvalid, configuration.retriesChangedTokenAtOnce else { return ended }
        return ended + [.checkTokenChanged]
    }

    /// The token read after TOKEN_INVALID differs from the one refused: a rotated token, so the
    /// backoff that the refusal started is cut short. The window stays as the refusal left it.
    mutating func tokenChanged(now: MonotonicInstant) -> [LinkAction] {
        switch state {
        case .disconnected(let waiting):
            guard case .backoff = waiting else { return [.ignored(reason: "a changed token while waiting for a network")] }
            return cancel(waiting) + startAttempt(reason: "the token changed since the server refused it", now: now)
        case .disconnecting(var disconnecting):
            guard case .reconnect = disconnecting.next else { return [.ignored(reason: "a changed token while disconnecting to stop")] }
            return replaceNext(&disconnecting, with: .reconnect(.atOnce), reason: "the token changed since the server refused it")
        case .stopped, .connecting, .connected:
            return [.ignored(reason: "a changed token while \(phase)")]
        }
    }

    /// GOAWAY arrived: close gracefully and come back as told. Not a failure.
    mutating func goaway(
        _ attempt: AttemptID,
        code: WireCode,
        retryAfter: Duration?,
        redirect: Endpoint?,
        now: MonotonicInstant
    ) -> [LinkAction] {
        switch state {
        case .connecting(let connecting) where connecting.attempt == attempt && connecting.stage.holdsSocket:
            // Before LOGIN_OK the server has proved nothing: its REDIRECT is not followed.
            let refused = redirect.map { "; REDIRECT to \($0) ignored: not followed before LOGIN_OK" } ?? ""
            let (next, why) = afterGoaway(code: code, retryAfter: retryAfter, redirect: nil)
            return end(connecting, sendError: nil, next: next, reason: why + refused, now: now)
        case .connected(let connected) where connected.attempt == attempt:
            let policy = RedirectPolicy(endpoints: configuration.endpoints, allowedPatterns: configuration.redirectAllow)
            let permitted = redirect.flatMap { policy.permits($0) ? $0 : nil }
            let refused = redirect.flatMap { policy.permits($0) ? nil : "; REDIRECT to \($0) ignored: neither a configured endpoint nor in [server] redirect_allow" } ?? ""
            let (next, why) = afterGoaway(code: code, retryAfter: retryAfter, redirect: permitted)
            return close(attempt, sendError: nil, next: next, reason: why + refused)
        case .stopped, .disconnected, .connecting, .connected, .disconnecting:
            return [.ignored(reason: "GOAWAY from \(attempt) while \(phase)")]
        }
    }

    /// ERROR on session 0 arrived; the server closes after it.
    mutating func errorFrame(_ attempt: AttemptID, code: WireCode, now: MonotonicInstant) -> [LinkAction] {
        switch state {
        case .connecting(let connecting) where connecting.attempt == attempt && connecting.stage.holdsSocket:
            let (next, why) = afterCode(code, retryAfter: nil, linkUpSince: nil)
            return end(connecting, sendError: nil, next: next, reason: "ERROR \(code): \(why)", now: now)
        case .connected(let connected) where connected.attempt == attempt:
            let (next, why) = afterCode(code, retryAfter: nil, linkUpSince: (connected.since, now))
            return close(attempt, sendError: nil, next: next, reason: "ERROR \(code): \(why)")
        case .stopped, .disconnected, .connecting, .connected, .disconnecting:
            return [.ignored(reason: "ERROR \(code) from \(attempt) while \(phase)")]
        }
    }

    /// The codec found the server breaking the protocol (bad CRC, oversized
    /// frame, …): send ERROR with `code`, close, back off.
    mutating func protocolViolation(
        _ attempt: AttemptID,
        code: WireCode,
        reason: String,
        now: MonotonicInstant
    ) -> [LinkAction] {
        switch state {
        case .connecting(let connecting) where connecting.attempt == attempt && connecting.stage.holdsSocket:
            let (next, why) = afterAttemptFailure("protocol violation: \(reason)")
            return end(connecting, sendError: code, next: next, reason: why, now: now)
        case .connected(let connected) where connected.attempt == attempt:
            let (next, why) = afterLinkLost(since: connected.since, now: now, "protocol violation: \(reason)")
            return close(attempt, sendError: code, next: next, reason: why)
        case .stopped, .disconnected, .connecting, .connected, .disconnecting:
            return [.ignored(reason: "protocol violation by \(attempt) while \(phase): \(reason)")]
        }
    }

    /// The daemon's own store failed (disk, database) while the link was up: the
    /// server did nothing wrong, so close without ERROR, back off like a failed
    /// attempt, and resume from what is stored on the next link.
    mutating func localFailure(_ attempt: AttemptID, reason: String, now: MonotonicInstant) -> [LinkAction] {
        switch state {
        case .connected(let connected) where connected.attempt == attempt:
            let (next, why) = afterAttemptFailure("local store failure: \(reason)")
            return close(attempt, sendError: nil, next: next, reason: why)
        case .stopped, .disconnected, .connecting, .connected, .disconnecting:
            return [.ignored(reason: "local store failure while \(phase): \(reason)")]
        }
    }
}
