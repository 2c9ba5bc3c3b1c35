/// Everything `imagentd.toml` can set, with the defaults a packaged system
/// service uses. Every key is documented in `imagentd.toml(5)`.
struct DaemonConfiguration: Hashable, Sendable {
    struct Server: Hashable, Sendable {
        /// `host:port` in failover order; IPv6 literals in brackets.
        var endpoints: [String] = []
        /// Stable identity of this installation (AGENT_ID); empty: derived from /etc/machine-id.
        var agentID = ""
        /// The largest DATA body this agent accepts (MAX_FRAME in HELLO).
        var maxFrameBytes: UInt32 = 1 << 20
        var tls = TLS()
        /// Plaintext to a non-loopback endpoint is refused unless this says so (`allow_plaintext`).
        var allowPlaintext = false
        /// Host patterns a GOAWAY REDIRECT may also lead to, beside the endpoints (`redirect_allow`).
        var redirectAllow: [String] = []
        /// The upstream protocol (`protocol`): IMLink/1 or MQTT 5 (`[mqtt]`).
        var upstreamProtocol = UpstreamProtocol.imlink
    }

    struct TLS: Hashable, Sendable {
        /// On by default: the token and every payload cross the network.
        var enabled = true
        /// PEM bundle of trusted CAs; empty: the system's trust store.
        var caFile = ""
        /// Name to verify (and send as SNI); empty: the endpoint's host.
        var serverName = ""
        var certificateFile = ""
        var privateKeyFile = ""
        /// Certificate verification; turning it off is for tests only.
        var verify = true
    }

    struct IPC: Hashable, Sendable {
        var socket = "/run/imagent/imagent.sock"
        var mode: UInt32 = 0o660
        /// Group that owns the socket; empty: the daemon's own.
        var group = ""
        /// Members of this group (and root) may CONNECT, DISCONNECT, RECONNECT and RELOAD.
        var adminGroup = "imagent-admin"
    }

    enum Durability: String, Hashable, Sendable {
        /// Committed messages survive a crash of the daemon (WAL, synchronous=NORMAL).
        case process
        /// Committed messages survive a power loss too (synchronous=FULL).
        case power
    }

    struct Store: Hashable, Sendable {
        var directory = "/var/lib/imagent"
        var durability = Durability.power
        /// Payload bytes all sessions together hold in memory; the rest of each queue is only in the store.
        var memoryBudgetBytes = 8 << 20
        /// The largest the database may grow; nil: half the size of the file system it is on.
        var maxBytes: Int?
    }

    struct Heartbeat: Hashable, Sendable {
        var minSeconds = 15
        var maxSeconds = 300
    }

    struct Reconnect: Hashable, Sendable {
        var baseMS = 1_000
        var capMS = 60_000
        var probeMS = 1_000
    }

    struct Limits: Hashable, Sendable {
        /// Connections at once, counted from accept (before HELLO), all users together.
        var maxClients = 256
        /// Connections at once from one uid, counted from accept.
        var maxClientsPerUID = 64
        var maxSessions = 10_000
        /// Open sessions one uid may hold.
        var maxSessionsPerUID = 1_000
        var maxPayloadBytes = 1 << 20
        /// Messages waiting to go upstream, per session; beyond: QUEUE_FULL.
        var outboxMessages = 10_000
        /// Messages waiting for the local client, per session; beyond: WINDOW 0 upstream.
        var inboxMessages = 10_000
        /// Payload bytes waiting to go upstream, per session; beyond: QUEUE_FULL.
        var outboxBytes = 1 << 30
        /// Payload bytes waiting to go upstream in all sessions of one uid; beyond: QUEUE_FULL.
        var uidOutboxBytes = 4 << 30
    }

    enum LogLevel: String, Hashable, Sendable, CaseIterable {
        case trace, debug, info, notice, warning, error, critical
    }

    var server = Server()
    /// `[mqtt]`, used when `[server] protocol = "mqtt"`.
    var mqtt = MQTTSettings()
    /// `[auth]`; nil: the systemd credential `imlink-token` (`LinkConfiguration.defaultCredential`).
    var token: TokenSource?
    var ipc = IPC()
    var store = Store()
    var heartbeat = Heartbeat()
    var reconnect = Reconnect()
    var limits = Limits()
    var logLevel = LogLevel.info
    /// Watch rtnetlink for network changes.
    var watchNetwork = true
    /// `host:port` of a Prometheus text endpoint on loopback; empty: off.
    var prometheusListen = ""
    /// Consent to serve the Prometheus endpoint at an address off loopback (it has no authentication).
    var prometheusAllowRemote = false
}

extension DaemonConfiguration.Durability: CaseIterable {}
