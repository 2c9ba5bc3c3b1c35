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
        }
    }

    /// A stable AGENT_ID from /etc/machine-id (the same on every start, and
    /// unique per installation), else from the host name.
    static func machineAgentID() -> String {
        if let id = readSmallFile("/etc/machine-id"), !id.isEmpty { return "imagentd-" + id }
        var name = [CChar](repeating: 0, count: 256)
        gethostname(&name, name.count)
        let host = name.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        return "imagentd-" + (host.isEmpty ? "unknown" : host)
    }

    private static func readSmallFile(_ path: String) -> String? {
        guard let bytes = try? TokenSource.file(path).read(timeout: .seconds(1)) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }
}
