import CSystemd
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension LinkConfiguration {
    /// Where the token comes from when `[auth]` names none: the systemd
    /// credential the packaged unit loads (`LoadCredential=imlink-token:…`).
    static let defaultCredential = "imlink-token"

    /// The link's part of `imagentd.toml`: `[server]`, `[server.tls]`,
    /// `[auth]`, `[heartbeat]`, `[reconnect]`, `watch_network`.
    init(_ daemon: DaemonConfiguration) {
        let token = daemon.linkToken
        let agentID = daemon.server.agentID.isEmpty ? Self.machineAgentID() : daemon.server.agentID
        self.init(endpoints: daemon.server.endpoints, token: token, agentID: agentID)
        let tls = daemon.server.tls
        self.tls = TLS(
            enabled: tls.enabled,
            caFile: tls.caFile.isEmpty ? nil : tls.caFile,
            serverName: tls.serverName.isEmpty ? nil : tls.serverName,
            certificateFile: tls.certificateFile.isEmpty ? nil : tls.certificateFile,
            privateKeyFile: tls.privateKeyFile.isEmpty ? nil : tls.privateKeyFile,
            verifyPeer: tls.verify
        )
        redirectAllow = daemon.server.redirectAllow
        maxFrame = daemon.server.maxFrameBytes
        heartbeatMin = .seconds(daemon.heartbeat.minSeconds)
        heartbeatMax = .seconds(daemon.heartbeat.maxSeconds)
        reconnectBase = .milliseconds(daemon.reconnect.baseMS)
        reconnectCap = .milliseconds(daemon.reconnect.capMS)
        reconnectProbe = .milliseconds(daemon.reconnect.probeMS)
        watchNetwork = daemon.watchNetwork
        agentVersion = DaemonCore.version
        if daemon.server.upstreamProtocol == .mqtt {
            mqtt = MQTTLinkSettings(daemon.mqtt, agentID: agentID, hasToken: daemon.token != nil)
            mqtt?.maxPayloadBytes = daemon.limits.maxPayloadBytes
        }
    }

    /// imagent's application id for sd_id128_get_machine_app_specific(3). Fixed for good: every
    /// installation's default AGENT_ID is derived from it, and a new one would be a new identity.
    static let agentIDApplication = "68735793a19a4b94a5f5327043e30672"

    /// A stable AGENT_ID (the same on every start, and unique per installation): the machine id
    /// hashed for this application, as machine-id(5) asks, so the server never learns the host's
    /// machine id itself; else the host name.
    static func machineAgentID() -> String {
        if let id = machineAppSpecificID() { return "imagentd-" + id }
        var name = [CChar](repeating: 0, count: 256)
        gethostname(&name, name.count)
        let host = name.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        return "imagentd-" + (host.isEmpty ? "unknown" : host)
    }

    /// `sd_id128_get_machine_app_specific` of `agentIDApplication` as 32 lower-case hex digits:
    /// HMAC-SHA256 keyed by /etc/machine-id over the application id, as a v4 UUID. Nil without a
    /// machine id.
    static func machineAppSpecificID() -> String? {
        var application = sd_id128_t()
        guard sd_id128_from_string(agentIDApplication, &application) == 0 else { return nil }
        var derived = sd_id128_t()
        guard sd_id128_get_machine_app_specific(application, &derived) == 0 else { return nil }
        var text = [CChar](repeating: 0, count: 33)
        return text.withUnsafeMutableBufferPointer { buffer in
            String(cString: sd_id128_to_string(derived, buffer.baseAddress!))
        }
    }
}
