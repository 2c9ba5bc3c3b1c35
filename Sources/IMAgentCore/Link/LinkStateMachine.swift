import IMLink

/// The LinkEngine's logic: one IMLink connection, from token to LOGIN_OK,
/// kept up through failures, server orders and network changes. A pure
/// value: each event returns the actions the I/O layer performs, in order.
///
/// ```
///            start / userConnect                 loginOK
///  Stopped ─────────────────────▶ Connecting ─────────────▶ Connected
///     ▲                  token→resolve→tcp→(tls)→hello→login     │
///     │                          │  ▲                            │
///     │ fatal code,       failure│  │ backoff elapsed,           │ lost, GOAWAY,
///     │ userDisconnect,          ▼  │ network up                 │ ERROR, PONG missing
///     │ shutdown          Disconnected (backoff | no network)    │
///     │                          ▲                               │
///     └──────────────────── Disconnecting ◀──────────────────────┘
///                     (our close, until the socket is closed)
/// ```
///
/// The response to each reason code (wire.md section 6), from LOGIN_FAIL,
/// ERROR on session 0 or GOAWAY:
///
/// | code                 | next attempt                                   | backoff window |
/// |----------------------|------------------------------------------------|----------------|
/// | PROTOCOL, unknown    | after the backoff                              | grows          |
/// | VERSION_UNSUPPORTED  | none: Stopped until a user connect             | —              |
/// | TOKEN_INVALID        | after the backoff, with a fresh token          | grows          |
/// | TOKEN_EXPIRED        | at once, with a fresh token                    | unchanged      |
/// | FORBIDDEN            | none: Stopped until a user connect             | —              |
/// | OVERLOADED           | after RETRY_AFTER_MS within 1 s…15 min, + ≤ min(20 %, 1 s); without it the backoff | grows |
/// | FRAME_TOO_LARGE      | at once when the link was up, else as PROTOCOL | unchanged      |
/// | any other GOAWAY     | after RETRY_AFTER_MS as OVERLOADED (1–2 s if 0 or none), to REDIRECT if given | grows |
///
/// The three failure classes (`ReconnectPolicy`): a *silent path* (a TCP
/// stage that timed out or was reported unreachable, a link the heartbeat
/// found dead) probes — one connect at a time with a 1–2 s deadline — and
/// never grows the window; a *refusing* server (RST, TLS, HELLO, LOGIN_FAIL,
/// ERROR, GOAWAY, a link closed by the peer) and an *overloaded* one
/// (OVERLOADED) back off and grow it.
///
/// Failures of the endpoint itself (no address, no TCP, TLS or HELLO failing,
/// a stage deadline, the socket closing before LOGIN_OK) fail over to the
/// next endpoint at once; after a full round the backoff applies
/// (`EndpointRotation`, `ReconnectPolicy`). Without a usable network the
/// machine waits quietly: no timers, no attempts, until `networkUp`.
///
/// Every event that does not fit the state is answered deliberately: results
/// of an abandoned attempt and stale timers are recognised by their IDs and
/// ignored; a frame the current connection must not send in its phase is a
/// fatal protocol error (wire.md section 1); anything else is ignored with a
/// reason. No event traps.
struct LinkStateMachine<Random: RandomNumberGenerator> {
    struct Configuration: Hashable, Sendable {
        /// Failover order; the first is preferred.
        var endpoints: [Endpoint]
        var tls: Bool
        /// The deadline of each connect stage (wire.md section 4).
        var stageTimeout: Duration
        /// The protocol versions this agent speaks (HELLO's VERSION_MIN…MAX).
        var versions: ClosedRange<UInt8>
        var reconnect: ReconnectPolicy.Configuration
        /// `[server] redirect_allow`: hosts a REDIRECT may lead to beside `endpoints`.
        var redirectAllow: [String] = []

        init(
            endpoints: [Endpoint],
            tls: Bool = false,
            stageTimeout: Duration = .seconds(10),
            versions: ClosedRange<UInt8> = 1...1,
            reconnect: ReconnectPolicy.Configuration = ReconnectPolicy.Configuration()
        ) {
            self.endpoints = endpoints
            self.tls = tls
            self.stageTimeout = stageTimeout
            self.versions = versions
            self.reconnect = reconnect
        }
    }

    private enum Waiting {
        case backoff(timer: LinkTimerID, until: MonotonicInstant)
        case network
    }

    private struct Connecting {
        var attempt: AttemptID
        var target: EndpointRotation.Target
        var endpoint: Endpoint
        var stage: ConnectStage
        var stageTimer: LinkTimerID
        /// When the current stage began, and its deadline (a probe's TCP
        /// stage is shorter than `stageTimeout`).
        var stageSince: MonotonicInstant
        var stageDeadline: Duration
        /// Set by HELLO_OK, before the login stage.
        var hello: HelloResult?
    }

    private struct Connected {
        var attempt: AttemptID
        var endpoint: Endpoint
        var since: MonotonicInstant
        var hello: HelloResult
    }

    /// What follows once no connection is left.
    private enum Next {
        case reconnect(ReconnectPolicy.Delay)
        case waitForNetwork
        case stop(StopReason)
    }

    private struct Disconnecting {
        var attempt: AttemptID
        var next: Next
        /// Why the connection is being closed, for the transition after it.
        var reason: String
    }

    private enum State {
        case stopped(StopReason)
        case disconnected(Waiting)
        case connecting(Connecting)
        case connected(Connected)
        case disconnecting(Disconnecting)
    }

    let configuration: Configuration
    private var state: State = .stopped(.notStarted)
    private var random: Random
    private(set) var reconnectPolicy: ReconnectPolicy
    private(set) var rotation: EndpointRotation
    private var nextAttempt = AttemptID.first
    private var nextTimer = LinkTimerID.first
    private var dropTokenOnNextAttempt = false
    /// The class of the last failure, nil after a link or a fresh start.
    /// After a silent path the next TCP stage is a probe, with the policy's
    /// short deadline.
    private(set) var lastFailure: ReconnectPolicy.FailureClass?
    var probing: Bool { lastFailure == .pathSilent }
    /// Until the network watcher says otherwise, assume a route.
    private(set) var networkAvailable = true

    init(configuration: Configuration, random: Random) {
        self.configuration = configuration
        self.random = random
        self.reconnectPolicy = ReconnectPolicy(configuration: configuration.reconnect)
        self.rotation = EndpointRotation(endpoints: configuration.endpoints)
    }

    var phase: LinkPhase {
        switch state {
        case .stopped(let reason): .stopped(reason)
        case .disconnected(.backoff(_, let until)): .waitingToReconnect(until: until)
        case .disconnected(.network): .waitingForNetwork
        case .connecting(let connecting): .connecting(connecting.stage, connecting.endpoint)
        case .connected(let connected): .connected(connected.endpoint)
        case .disconnecting: .disconnecting
        }
    }

    /// What HELLO_OK negotiated on the current connection.
    var negotiated: HelloResult? {
        switch state {
        case .connected(let connected): connected.hello
        case .stopped, .disconnected, .connecting, .disconnecting: nil
        }
    }

    // MARK: Lifecycle and user events

    /// The daemon starts: connect unless there is no network.
    mutating func start(now: MonotonicInstant) -> [LinkAction] {
        switch state {
        case .stopped(.notStarted):
            return proceed(to: .reconnect(.atOnce), reason: "daemon started", now: now)
        case .stopped, .disconnected, .connecting, .connected, .disconnecting:
            return [.ignored(reason: "start while \(phase): already started")]
        }
    }

    /// A user asked to connect: now, with a fresh backoff, even without a
    /// network (the watcher may be wrong; a failure then waits for one).
    mutating func userConnect(now: MonotonicInstant) -> [LinkAction] {
        switch state {
        case .stopped(.shutdown):
            return [.ignored(reason: "connect while shutting down")]
        case .stopped:
            forgiveFailures()
            return startAttempt(reason: "user connect", now: now)
        case .disconnected(let waiting):
            forgiveFailures()
            return cancel(waiting) + startAttempt(reason: "user connect", now: now)
        case .connecting, .connected:
            return [.ignored(reason: "connect while \(phase)")]
        case .disconnecting(var disconnecting):
            return replaceNext(&disconnecting, with: .reconnect(.atOnce), reason: "user connect")
        }
    }

    /// A user asked to reconnect: drop what there is and connect at once.
    mutating func userReconnect(now: MonotonicInstant) -> [LinkAction] {
        switch state {
        case .stopped(.shutdown):
            return [.ignored(reason: "reconnect while shutting down")]
        case .stopped, .disconnected:
            return userConnect(now: now)
        case .connecting(let connecting):
            forgiveFailures()
            return end(connecting, sendError: nil, next: .reconnect(.atOnce), reason: "user reconnect", now: now)
        case .connected(let connected):
            forgiveFailures()
            return close(connected.attempt, sendError: nil, next: .reconnect(.atOnce), reason: "user reconnect")
        case .disconnecting(var disconnecting):
            forgiveFailures()
            return replaceNext(&disconnecting, with: .reconnect(.atOnce), reason: "user reconnect")
        }
    }

    /// A user asked to disconnect: stay disconnected until asked to connect.
    mutating func userDisconnect(now: MonotonicInstant) -> [LinkAction] {
        stop(.userDisconnected, reason: "user disconnect", now: now)
    }

    /// The daemon is stopping: close, and accept no connect afterwards.
    mutating func shutdown(now: MonotonicInstant) -> [LinkAction] {
        stop(.shutdown, reason: "shutdown", now: now)
    }

    // MARK: Network events

    /// A default route appeared (or changed): whatever failed before says
    /// nothing about this network, so start over and connect at once.
    mutating func networkUp(now: MonotonicInstant) -> [LinkAction] {
        networkAvailable = true
        switch state {
        case .stopped, .connecting, .connected:
            forgiveFailures()
            return []
        case .disconnected(let waiting):
            forgiveFailures()
            return cancel(waiting) + startAttempt(reason: "network up", now: now)
        case .disconnecting(var disconnecting):
            switch disconnecting.next {
            case .stop:
                return [.ignored(reason: "network up while disconnecting to stop")]
            case .reconnect, .waitForNetwork:
                forgiveFailures()
                return replaceNext(&disconnecting, with: .reconnect(.atOnce), reason: "network up")
            }
        }
    }

    /// No default route: drop the connection and wait quietly.
    mutating func networkDown(now: MonotonicInstant) -> [LinkAction] {
        networkAvailable = false
        switch state {
        case .stopped, .disconnected(.network):
            return []
        case .disconnected(let waiting):
            return cancel(waiting) + proceed(to: .waitForNetwork, reason: "network down", now: now)
        case .connecting(let connecting):
            return end(connecting, sendError: nil, next: .waitForNetwork, reason: "network down", now: now)
        case .connected(let connected):
            return close(connected.attempt, sendError: nil, next: .waitForNetwork, reason: "network down")
        case .disconnecting(var disconnecting):
            switch disconnecting.next {
            case .stop, .waitForNetwork:
                return []
            case .reconnect:
                return replaceNext(&disconnecting, with: .waitForNetwork, reason: "network down")
            }
        }
    }

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
        now: MonotonicInstant
    ) -> [LinkAction] {
        guard let connecting = current(attempt, in: .login) else {
            return outOfPhase("LOGIN_FAIL", attempt, now: now)
        }
        let (next, why) = afterCode(code, retryAfter: retryAfter, linkUpSince: nil)
        return end(connecting, sendError: nil, next: next, reason: "LOGIN_FAIL \(code): \(why)", now: now)
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

    // MARK: Connection events

    /// The heartbeat declared the link dead (PONG missing).
    mutating func heartbeatTimedOut(_ attempt: AttemptID, now: MonotonicInstant) -> [LinkAction] {
        switch state {
        case .connected(let connected) where connected.attempt == attempt:
            let (next, why) = afterLinkDiedSilently(since: connected.since, now: now, "heartbeat: PONG missing")
            return close(attempt, sendError: nil, next: next, reason: why)
        case .stopped, .disconnected, .connecting, .connected, .disconnecting:
            return [.ignored(reason: "heartbeat timeout of \(attempt) while \(phase)")]
        }
    }

    /// A probe beside the suspected link got through after the path had been
    /// silent (`PathProbe`): the old connection waits on TCP's retransmission
    /// backoff, so it is closed and a new one made at once, like a link the
    /// heartbeat found dead (the backoff does not grow).
    mutating func pathReturned(_ attempt: AttemptID, reason: String, now: MonotonicInstant) -> [LinkAction] {
        switch state {
        case .connected(let connected) where connected.attempt == attempt:
            let (next, why) = afterLinkDiedSilently(since: connected.since, now: now, reason)
            return close(attempt, sendError: nil, next: next, reason: why)
        case .stopped, .disconnected, .connecting, .connected, .disconnecting:
            return [.ignored(reason: "path back for \(attempt) while \(phase)")]
        }
    }

    /// The socket of `attempt` is closed, by us or by the peer.
    mutating func connectionClosed(_ attempt: AttemptID, reason: String, now: MonotonicInstant) -> [LinkAction] {
        switch state {
        case .disconnecting(let disconnecting) where disconnecting.attempt == attempt:
            return proceed(to: disconnecting.next, reason: disconnecting.reason, now: now)
        case .connected(let connected) where connected.attempt == attempt:
            let (next, why) = afterLinkLost(since: connected.since, now: now, "connection closed: \(reason)")
            return proceed(to: next, reason: why, now: now)
        case .connecting(let connecting) where connecting.attempt == attempt && connecting.stage.holdsSocket:
            let (next, why) = afterEndpointFailure(connecting, "connection closed in \(connecting.stage): \(reason)")
            return [.cancelTimer(connecting.stageTimer)] + proceed(to: next, reason: why, now: now)
        case .stopped, .disconnected, .connecting, .connected, .disconnecting:
            return [.ignored(reason: "close of \(attempt) while \(phase): \(reason)")]
        }
    }

    // MARK: Transitions

    private mutating func move(to new: State, reason: String) -> LinkAction {
        let old = phase
        state = new
        return .stateChanged(from: old, to: phase, reason: reason)
    }

    private mutating func makeTimer() -> LinkTimerID {
        defer { nextTimer = nextTimer.next }
        return nextTimer
    }

    /// From a state that holds no connection, do what `next` says.
    private mutating func proceed(to next: Next, reason: String, now: MonotonicInstant) -> [LinkAction] {
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

    private mutating func startAttempt(reason: String, now: MonotonicInstant) -> [LinkAction] {
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

    private mutating func advance(
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
    private mutating func end(
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
    private mutating func close(_ attempt: AttemptID, sendError: WireCode?, next: Next, reason: String) -> [LinkAction] {
        [
            move(to: .disconnecting(Disconnecting(attempt: attempt, next: next, reason: reason)), reason: reason),
            .closeConnection(attempt, sendError: sendError),
        ]
    }

    private mutating func stop(_ stopReason: StopReason, reason: String, now: MonotonicInstant) -> [LinkAction] {
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

    private mutating func replaceNext(_ disconnecting: inout Disconnecting, with next: Next, reason: String) -> [LinkAction] {
        if case .stop(.shutdown) = disconnecting.next {
            return [.ignored(reason: "\(reason) while disconnecting to shut down")]
        }
        disconnecting.next = next
        disconnecting.reason = reason
        state = .disconnecting(disconnecting)
        return []
    }

    private func cancel(_ waiting: Waiting) -> [LinkAction] {
        switch waiting {
        case .backoff(let timer, _): [.cancelTimer(timer)]
        case .network: []
        }
    }

    /// The attempt in progress, when it is `attempt` and in `stage`.
    private func current(_ attempt: AttemptID, in stage: ConnectStage) -> Connecting? {
        switch state {
        case .connecting(let connecting) where connecting.attempt == attempt && connecting.stage == stage:
            connecting
        case .stopped, .disconnected, .connecting, .connected, .disconnecting:
            nil
        }
    }

    /// A handshake frame outside its stage: a protocol violation when the
    /// current connection sent it, else a stale frame of a closed one.
    private mutating func outOfPhase(_ frame: String, _ attempt: AttemptID, now: MonotonicInstant) -> [LinkAction] {
        protocolViolation(attempt, code: .protocolError, reason: "\(frame) while \(phase)", now: now)
    }

    // MARK: Deciding the next attempt

    private mutating func forgiveFailures() {
        reconnectPolicy.reset()
        rotation.startNewRound()
        lastFailure = nil
    }

    /// The endpoint failed at its own fault: the next one at once, or after
    /// a full round the next probe (a silent path) or the backoff (a refusal).
    private mutating func afterEndpointFailure(
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
    private mutating func afterAttemptFailure(_ reason: String) -> (Next, String) {
        rotation.startNewRound()
        lastFailure = .serverRefusing
        return (.reconnect(.after(reconnectPolicy.attemptFailed(using: &random))), reason)
    }

    /// An established link was closed or broken by the server's side.
    private mutating func afterLinkLost(since: MonotonicInstant, now: MonotonicInstant, _ reason: String) -> (Next, String) {
        rotation.startNewRound()
        lastFailure = .serverRefusing
        let upFor = now - since
        let delay = reconnectPolicy.linkLost(upFor: upFor, using: &random)
        return (.reconnect(.after(delay)), "\(reason) (link was up \(upFor))")
    }

    /// The heartbeat found an established link dead: the path is silent,
    /// so probing starts at once, without growing the backoff.
    private mutating func afterLinkDiedSilently(since: MonotonicInstant, now: MonotonicInstant, _ reason: String) -> (Next, String) {
        rotation.startNewRound()
        lastFailure = .pathSilent
        let upFor = now - since
        reconnectPolicy.linkDiedSilently(upFor: upFor)
        return (.reconnect(.atOnce), "\(reason) (link was up \(upFor)); path silent, probing")
    }

    private mutating func afterGoaway(code: WireCode, retryAfter: Duration?, redirect: Endpoint?) -> (Next, String) {
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
    private mutating func afterCode(
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

extension LinkStateMachine: Sendable where Random: Sendable {}
