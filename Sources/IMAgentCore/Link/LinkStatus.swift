import IMLink

/// A snapshot of the link for `imagent status`, IPC STATUS and sd_notify.
struct LinkStatus: Hashable, Sendable {
    /// Short state name: stopped, waiting, connecting, connected, disconnecting.
    var state: String
    /// The full phase, as logged ("connecting (tls) to a:7443").
    var detail: String
    /// The endpoint of the current attempt or link, `host:port`.
    var endpoint: String?
    /// When the current link reached LOGIN_OK (Unix ms, wall clock).
    var connectedSinceUnixMS: UInt64?
    var smoothedRTT: Duration?
    /// The heartbeat interval in force (before jitter), while connected.
    var heartbeatInterval: Duration?
    /// Links established after the first one.
    var reconnectCount: Int
    /// Connection attempts started since the engine started.
    var attempts: Int
    /// The reason of the last transition away from a working or attempted link.
    var lastError: String?
    /// When `lastError` was first seen (Unix ms, wall clock); the daemon stamps it.
    var lastErrorAtUnixMS: UInt64?
    /// The phase the snapshot was taken in: the sentence reads the backoff deadline from it.
    var phase: LinkPhase
    /// The server's clock minus this host's at the last LOGIN_OK, in ms (off by up to one RTT).
    var serverClockOffsetMS: Int64?
    /// When the server's TLS certificate (of the last handshake) expires, Unix ms.
    var serverCertificateNotAfterUnixMS: UInt64?
    /// What the MQTT broker granted at the last CONNACK; nil for IMLink or before one.
    var brokerGrant: MQTTBrokerGrant?
    /// Set while the daemon has no endpoints or no usable token: what is missing and what to do.
    var unconfigured: String?

    init(phase: LinkPhase) {
        self.phase = phase
        state = phase.shortName
        detail = phase.description
        reconnectCount = 0
        attempts = 0
    }
}

/// One state change of the link, with the reason the state machine gave.
struct LinkTransition: Sendable {
    var from: LinkPhase
    var to: LinkPhase
    var reason: String
    var status: LinkStatus
}

extension LinkPhase {
    var shortName: String {
        switch self {
        case .stopped: "stopped"
        case .waitingToReconnect, .waitingForNetwork: "waiting"
        case .connecting: "connecting"
        case .connected: "connected"
        case .disconnecting: "disconnecting"
        }
    }

    var isConnected: Bool {
        switch self {
        case .connected: true
        case .stopped, .waitingToReconnect, .waitingForNetwork, .connecting, .disconnecting: false
        }
    }
}

/// What sessions (the SessionRouter) hear from the link. Called on the
/// engine's event loop only; the router runs on the same loop.
protocol LinkSessionDelegate: AnyObject {
    /// LOGIN_OK: send OPEN for every session, then resend unacknowledged DATA.
    /// `serverKeepsAcknowledged`: false for MQTT, whose OPEN_OK says 0 after a restart.
    func linkEstablished(negotiated: HelloResult, serverMaxFrame: UInt32, serverKeepsAcknowledged: Bool)
    /// The link is gone; nothing can be sent until the next `linkEstablished`. `cause`: the class
    /// of the failure that ended it; nil when nothing failed (a user's command, a new token, stopping).
    func linkLost(reason: String, cause: ReconnectPolicy.FailureClass?)
    /// OPEN_OK, OPEN_FAIL, DATA, ACK, WINDOW, CLOSE, or ERROR with a session id.
    func received(_ frame: Frame)
}

/// What the network watcher tells the engine.
enum NetworkEvent: Hashable, Sendable, CustomStringConvertible {
    /// The endpoints became reachable (a route to them exists).
    case up
    /// No route to any endpoint.
    case down
    /// Still reachable, but links, addresses or routes changed.
    case changed

    var description: String {
        switch self {
        case .up: "network up"
        case .down: "network down"
        case .changed: "network changed"
        }
    }
}
