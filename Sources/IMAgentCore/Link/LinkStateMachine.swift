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
/// | TOKEN_INVALID        | after the backoff, with a fresh token; at once if the token changed (MQTT only) | grows |
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
        /// After TOKEN_INVALID, read the token again at once and connect at once if it changed (the
        /// MQTT upstream, where a broker's refused password is how a rotated token shows). IMLink
        /// keeps wire.md's rule: the fresh token waits for the backoff.
        var retriesChangedTokenAtOnce = false

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

    enum Waiting {
        case backoff(timer: LinkTimerID, until: MonotonicInstant)
        case network
    }

    struct Connecting {
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

    struct Connected {
        var attempt: AttemptID
        var endpoint: Endpoint
        var since: MonotonicInstant
        var hello: HelloResult
    }

    /// What follows once no connection is left.
    enum Next {
        case reconnect(ReconnectPolicy.Delay)
        case waitForNetwork
        case stop(StopReason)
    }

    struct Disconnecting {
        var attempt: AttemptID
        var next: Next
        /// Why the connection is being closed, for the transition after it.
        var reason: String
    }

    enum State {
        case stopped(StopReason)
        case disconnected(Waiting)
        case connecting(Connecting)
        case connected(Connected)
        case disconnecting(Disconnecting)
    }

    let configuration: Configuration
    var state: State = .stopped(.notStarted)
    var random: Random
    var reconnectPolicy: ReconnectPolicy
    var rotation: EndpointRotation
    var nextAttempt = AttemptID.first
    var nextTimer = LinkTimerID.first
    var dropTokenOnNextAttempt = false
    /// The class of the last failure, nil after a link or a fresh start.
    /// After a silent path the next TCP stage is a probe, with the policy's
    /// short deadline.
    var lastFailure: ReconnectPolicy.FailureClass?
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
}

extension LinkStateMachine: Sendable where Random: Sendable {}
