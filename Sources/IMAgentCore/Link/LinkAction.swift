import IMLink

/// The steps of one connection attempt, in order (wire.md section 4).
enum ConnectStage: Int, Hashable, Sendable, CaseIterable, CustomStringConvertible {
    /// Read the token (file, command or systemd credential), cached.
    case token
    /// Resolve the endpoint's name.
    case resolve
    /// Open TCP, racing the addresses (Happy Eyeballs).
    case tcp
    /// The TLS handshake, when configured.
    case tls
    /// HELLO sent, waiting for HELLO_OK.
    case hello
    /// LOGIN sent, waiting for LOGIN_OK.
    case login

    /// Whether the attempt holds a socket in this stage, so that leaving it
    /// early means closing that socket and waiting until it is closed.
    var holdsSocket: Bool {
        switch self {
        case .token, .resolve: false
        case .tcp, .tls, .hello, .login: true
        }
    }

    var description: String {
        switch self {
        case .token: "token"
        case .resolve: "resolve"
        case .tcp: "tcp"
        case .tls: "tls"
        case .hello: "hello"
        case .login: "login"
        }
    }
}

/// Names one connection attempt. Every I/O completion and every frame the
/// I/O layer reports carries the attempt it belongs to, so a late result of
/// an abandoned attempt is recognised and ignored.
struct AttemptID: Hashable, Sendable, CustomStringConvertible {
    private var value: UInt64
    var description: String { "attempt-\(value)" }

    static let first = AttemptID(value: 1)
    var next: AttemptID { AttemptID(value: value + 1) }

    private init(value: UInt64) { self.value = value }
}

/// Names one arming of a link timer; a firing with an ID that is no longer
/// armed is stale and ignored.
struct LinkTimerID: Hashable, Sendable, CustomStringConvertible {
    private var value: UInt64
    var description: String { "link-timer-\(value)" }

    static let first = LinkTimerID(value: 1)
    var next: LinkTimerID { LinkTimerID(value: value + 1) }

    private init(value: UInt64) { self.value = value }
}

/// What a link timer is for; the I/O layer reports its firing with the
/// matching event.
enum LinkTimerPurpose: Hashable, Sendable {
    /// Report `stageDeadlinePassed`.
    case stageDeadline(ConnectStage)
    /// Report `backoffElapsed`.
    case backoff
}

/// What HELLO_OK negotiated.
struct HelloResult: Hashable, Sendable {
    var version: UInt8
    var features: Features
    var maxFrame: UInt32
}

/// Why the link is stopped: nothing happens until a user connect (or a
/// restart, or a reload that connects).
enum StopReason: Hashable, Sendable, CustomStringConvertible {
    /// The daemon has not started the link yet.
    case notStarted
    /// A user asked to disconnect.
    case userDisconnected
    /// The server refused this agent for good (VERSION_UNSUPPORTED, FORBIDDEN).
    case refused(WireCode)
    /// The daemon is shutting down; nothing restarts the link.
    case shutdown

    var description: String {
        switch self {
        case .notStarted: "not started"
        case .userDisconnected: "disconnected by user"
        case .refused(let code): "refused by server (\(code))"
        case .shutdown: "shut down"
        }
    }
}

/// The link's state as the daemon reports and logs it.
enum LinkPhase: Hashable, Sendable, CustomStringConvertible {
    case stopped(StopReason)
    /// Disconnected, waiting for the backoff timer.
    case waitingToReconnect(until: MonotonicInstant)
    /// Disconnected, no usable network: no timers, no attempts.
    case waitingForNetwork
    case connecting(ConnectStage, Endpoint)
    case connected(Endpoint)
    /// Closing the connection; the next step waits for it to be closed.
    case disconnecting

    var description: String {
        switch self {
        case .stopped(let reason): "stopped (\(reason))"
        case .waitingToReconnect(let until): "disconnected, reconnecting at \(until)"
        case .waitingForNetwork: "disconnected, waiting for network"
        case .connecting(let stage, let endpoint): "connecting (\(stage)) to \(endpoint)"
        case .connected(let endpoint): "connected to \(endpoint)"
        case .disconnecting: "disconnecting"
        }
    }
}

/// What the I/O layer must do. An event returns a list, performed in order.
enum LinkAction: Hashable, Sendable {
    /// Get the token: the cached one unless `dropCached`, then a fresh one.
    /// Report `tokenObtained` or `stageFailed(.token)`.
    case obtainToken(AttemptID, dropCached: Bool)
    /// Read the token again, uncached, and report `tokenChanged` when it differs from the cached
    /// one the server just refused; report nothing otherwise (the backoff goes on).
    case checkTokenChanged
    /// Resolve the endpoint. Report `resolved` or `stageFailed(.resolve)`.
    case resolve(AttemptID, Endpoint)
    /// Connect to one of the addresses, giving up after `timeout` (the TCP
    /// stage's deadline: short for a probe). Report `tcpConnected` or
    /// `stageFailed(.tcp)`, with `pathSilent` when nothing answered.
    case connectTCP(AttemptID, [ResolvedAddress], timeout: Duration)
    /// Run the TLS handshake for the endpoint. Report `tlsEstablished` or `stageFailed(.tls)`.
    case startTLS(AttemptID, Endpoint)
    /// Send HELLO; HELLO_OK is reported as `helloOK`.
    case sendHello(AttemptID)
    /// Send LOGIN with the token; the answer is reported as `loginOK` or `loginFail`.
    case sendLogin(AttemptID)
    /// Start the heartbeat on this connection, under the server's HEARTBEAT_MS.
    case startHeartbeat(AttemptID, serverCeiling: Duration?)
    /// OPEN every session, then resend the DATA the server has not acknowledged.
    case reopenSessions(AttemptID)
    /// Flush what is queued, send ERROR with this code when given, close the
    /// socket (or cancel the connect), then report `connectionClosed` once.
    case closeConnection(AttemptID, sendError: WireCode?)
    /// Cancel the token or resolve work in flight; report nothing for it.
    case abandonAttempt(AttemptID)
    case armTimer(LinkTimerID, deadline: MonotonicInstant, purpose: LinkTimerPurpose)
    case cancelTimer(LinkTimerID)
    /// Log the transition with its reason (and update the status).
    case stateChanged(from: LinkPhase, to: LinkPhase, reason: String)
    /// The event changed nothing; log why at debug level.
    case ignored(reason: String)
}
