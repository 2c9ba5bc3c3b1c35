import IMLink

/// Everything the `LinkEngine` is started with. Every field has the default
/// `imagentd.toml(5)` documents; the daemon's config loader fills in what the
/// file says and `validated()` turns it into the cores' settings.
struct LinkConfiguration: Hashable, Sendable {
    /// TLS towards the server (swift-nio-ssl). Verification is on unless
    /// `verifyPeer` is explicitly set to false.
    struct TLS: Hashable, Sendable {
        var enabled: Bool = false
        /// PEM bundle of trusted CAs; nil uses the system's trust store.
        var caFile: String?
        /// SNI and the name verified in the server's certificate, for the
        /// configured endpoints. nil uses each endpoint's host (a GOAWAY
        /// REDIRECT target always uses its own host).
        var serverName: String?
        /// Client certificate chain (PEM) and its key, both or neither.
        var certificateFile: String?
        var privateKeyFile: String?
        var verifyPeer: Bool = true

        init(
            enabled: Bool = false,
            caFile: String? = nil,
            serverName: String? = nil,
            certificateFile: String? = nil,
            privateKeyFile: String? = nil,
            verifyPeer: Bool = true
        ) {
            self.enabled = enabled
            self.caFile = caFile
            self.serverName = serverName
            self.certificateFile = certificateFile
            self.privateKeyFile = privateKeyFile
            self.verifyPeer = verifyPeer
        }
    }

    /// `host:port` strings (IPv6 literals in brackets), in failover order.
    var endpoints: [String]
    var tls: TLS = TLS()
    /// `[server] redirect_allow`: where a GOAWAY REDIRECT may lead beside `endpoints`.
    var redirectAllow: [String] = []
    var token: TokenSource
    /// AGENT_ID: the stable identity of this installation (1–128 UTF-8 bytes).
    var agentID: String
    var agentVersion: String? = nil
    /// Heartbeat interval bounds (`[heartbeat] min_seconds`, `max_seconds`).
    var heartbeatMin: Duration = .seconds(15)
    var heartbeatMax: Duration = .seconds(300)
    /// How far NAT probing raises the interval per run of successes.
    var heartbeatProbeStep: Duration = .seconds(30)
    /// Backoff base and cap (`[reconnect] base_ms`, `cap_ms`).
    var reconnectBase: Duration = .seconds(1)
    var reconnectCap: Duration = .seconds(60)
    /// The first retry window after an established link was lost (herd
    /// protection, see `ReconnectPolicy`); clamped into base…cap.
    var reconnectHerdSpread: Duration = .seconds(30)
    /// How long a link must stay up before the backoff is forgiven.
    var reconnectStablePeriod: Duration = .seconds(30)
    /// While the path is silent, each probe's TCP deadline is drawn from
    /// `[probe, 2 × probe]` (`[reconnect] probe_ms`).
    var reconnectProbe: Duration = .seconds(1)
    /// The deadline of each connect stage, and of a token command.
    var stageTimeout: Duration = .seconds(10)
    /// MAX_FRAME we announce: the largest body we accept after HELLO_OK.
    var maxFrame: UInt32 = FrameHeader.defaultMaxBody
    /// Whether to follow rtnetlink (development mode and some tests turn it off).
    var watchNetwork: Bool = true
    /// How long resolved addresses are reused.
    var resolveCacheLifetime: Duration = .seconds(30)
    /// MQTT 5 instead of IMLink/1 (`[server] protocol = "mqtt"`); nil: IMLink/1.
    var mqtt: MQTTLinkSettings? = nil

    init(endpoints: [String], token: TokenSource, agentID: String) {
        self.endpoints = endpoints
        self.token = token
        self.agentID = agentID
    }

    /// What the pure cores are configured with, or why this cannot run.
    struct Validated: Sendable {
        var machine: LinkStateMachine<SystemRandomNumberGenerator>.Configuration
        var heartbeat: HeartbeatPolicy<SystemRandomNumberGenerator>.Configuration
        var endpoints: [Endpoint]
    }

    func validated() throws(LinkConfigurationError) -> Validated {
        guard !endpoints.isEmpty else { throw LinkConfigurationError("no endpoints configured") }
        var parsed: [Endpoint] = []
        for text in endpoints {
            guard let endpoint = Endpoint(parsing: text) else {
                throw LinkConfigurationError("endpoint \"\(text)\" is not host:port (IPv6 literals in brackets)")
            }
            parsed.append(endpoint)
        }
        let idBytes = agentID.utf8.count
        guard (1...128).contains(idBytes) else {
            throw LinkConfigurationError("agent id must be 1–128 UTF-8 bytes, not \(idBytes)")
        }
        guard heartbeatMin > .zero, heartbeatMin <= heartbeatMax else {
            throw LinkConfigurationError("heartbeat bounds \(heartbeatMin)…\(heartbeatMax) are not a positive range")
        }
        guard reconnectBase > .zero, reconnectBase <= reconnectCap else {
            throw LinkConfigurationError("reconnect base \(reconnectBase) must be positive and not above the cap \(reconnectCap)")
        }
        guard reconnectProbe > .zero else { throw LinkConfigurationError("reconnect probe interval must be positive") }
        guard stageTimeout > .zero else { throw LinkConfigurationError("stage timeout must be positive") }
        if let mqtt { _ = try mqtt.topics() }
        guard (1024...FrameHeader.maxNegotiableBody).contains(maxFrame) else {
            throw LinkConfigurationError("max frame \(maxFrame) is outside 1024…\(FrameHeader.maxNegotiableBody)")
        }
        guard (tls.certificateFile == nil) == (tls.privateKeyFile == nil) else {
            throw LinkConfigurationError("a client certificate needs its private key, and a key its certificate")
        }
        let reconnect = ReconnectPolicy.Configuration(
            base: reconnectBase,
            cap: reconnectCap,
            herdSpread: reconnectHerdSpread,
            stablePeriod: reconnectStablePeriod,
            probe: reconnectProbe
        )
        var machine = LinkStateMachine<SystemRandomNumberGenerator>.Configuration(
            endpoints: parsed,
            tls: tls.enabled,
            stageTimeout: stageTimeout,
            reconnect: reconnect
        )
        machine.redirectAllow = redirectAllow
        machine.retriesChangedTokenAtOnce = mqtt != nil
        guard heartbeatProbeStep > .zero else { throw LinkConfigurationError("heartbeat probe step must be positive") }
        let heartbeat = HeartbeatPolicy<SystemRandomNumberGenerator>.Configuration(
            bounds: heartbeatMin...heartbeatMax,
            activeCeiling: min(.seconds(120), heartbeatMax),
            probeStep: heartbeatProbeStep
        )
        return Validated(machine: machine, heartbeat: heartbeat, endpoints: parsed)
    }
}

struct LinkConfigurationError: Error, Hashable, Sendable, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
