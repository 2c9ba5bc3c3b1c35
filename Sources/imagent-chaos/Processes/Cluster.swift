import Foundation
import IMAgentTestKit

/// The long-lived processes of a run, in their namespaces: `imagent-refserver`
/// (namespace S, its veth address, a `--state` file so a restart keeps every
/// session and message), `imagentd` (namespace A, its Unix socket in the run
/// directory so clients in the root namespace reach it) and, during the delay
/// phase, the delay proxy (namespace A, on its loopback).
///
/// The daemon has two configuration files sharing one store and socket:
/// `direct.toml` (endpoint: the server's veth address) and `proxied.toml`
/// (endpoint: the delay proxy). Endpoints change only at a start, so the delay
/// phase begins and ends with a `kill -9` and a start on the other file.
final class Cluster: @unchecked Sendable {
    let topology: Topology
    /// The server (namespace S and its veth address, or — for the loopback first-connect
    /// figure — namespace A and 127.0.0.1) and the daemon (namespace A).
    let processes: ServerAndDaemon
    private(set) var proxy: ChildProcess?
    /// When the current daemon process was started, in Unix ms.
    private(set) var daemonStartedMS: Int64 = 0

    /// With the packaged [heartbeat] and [reconnect] defaults (heartbeat
    /// 15–300 s, backoff 1–60 s) rather than the suite's fast ones.
    private let packagedDefaults: Bool
    /// With `--upstream mqtt`: the broker and echo backend in place of the reference server.
    let mqtt: MQTTUpstream?

    /// What the daemon's endpoint is: the reference server's address or the broker's.
    var upstreamAddress: String { mqtt?.address ?? processes.serverAddress }

    var directory: String { processes.directory }
    var socketPath: String { processes.socketPath }

    /// The daemon's token: the reference server's and ejabberd's password for it.
    static let token = "chaos-token"

    init(directory: String, topology: Topology, serverOnLoopback: Bool = false, packagedDefaults: Bool = false,
         upstream: Upstream = .imlink, broker: MQTTBroker = .mosquitto) throws {
        self.topology = topology
        self.packagedDefaults = packagedDefaults
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        processes = try ServerAndDaemon(directory: directory, token: Self.token,
                                        serverHost: serverOnLoopback ? "127.0.0.1" : topology.serverAddress,
                                        serverNamespace: serverOnLoopback ? topology.agentNamespace : topology.serverNamespace,
                                        spawner: Children.shared.spawner)
        mqtt = upstream == .mqtt
            ? try MQTTUpstream(directory: directory, host: serverOnLoopback ? "127.0.0.1" : topology.serverAddress,
                               namespace: serverOnLoopback ? topology.agentNamespace : topology.serverNamespace,
                               broker: broker, password: Self.token)
            : nil
    }

    // MARK: Reference server

    /// Starts the server on a free port the first time, the same port and state after; returns when it listens.
    func startServer() async throws {
        if let mqtt { return try await mqtt.start() }
        try await processes.startServer()
    }

    /// `kill -9` the server (it commits before it acknowledges, so nothing acknowledged is lost);
    /// mosquitto gets SIGTERM instead (see `MQTTUpstream`).
    func killServer() async {
        if let mqtt { return await mqtt.stopBroker() }
        if let server = processes.server { await Children.shared.kill9(server.process) }
    }

    /// Everything on the server's side stopped (the echo backend too).
    func stopUpstream() async {
        if let mqtt { return await mqtt.stop() }
        await killServer()
    }

    // MARK: Daemon

    enum Route: String {
        case direct
        case proxied
    }

    /// Starts `imagentd` on the configuration for `route`; returns once its socket accepts connections.
    func startDaemon(_ route: Route) async throws {
        let config = directory + "/\(route.rawValue).toml"
        try writeDaemonConfig(config, endpoint: route == .direct ? upstreamAddress : "127.0.0.1:\(proxyPort)")
        daemonStartedMS = wallMS()
        try await processes.startDaemon(configPath: config, namespace: topology.agentNamespace)
    }

    func killDaemon() async {
        if let daemon = processes.daemon { await Children.shared.kill9(daemon.process) }
    }

    private func writeDaemonConfig(_ path: String, endpoint: String) throws {
        var config = DaemonConfigFile(endpoints: [endpoint], tokenFile: processes.tokenPath, socketPath: socketPath,
                                      storeDirectory: directory + "/store", agentID: "imagent-chaos")
        // The server is in another network namespace on a test-only address.
        config.allowPlaintext = true
        config.reconnectCapMS = packagedDefaults ? nil : 500
        config.watchNetwork = true
        config.logLevel = "info"
        if mqtt != nil {
            config.serverExtra = "protocol = \"mqtt\""
            // The broker keeps the daemon's session (and the QoS 1 messages for it) over every outage of the run.
            config.extra = "[mqtt]\nsession_expiry_seconds = 3600"
            if mqtt?.kind == .ejabberd { config.extra += "\nusername = \"\(MQTTUpstream.ejabberdUser)\"" }
        }
        try config.write(to: path)
        try FileManager.default.createDirectory(atPath: directory + "/store", withIntermediateDirectories: true)
    }

    // MARK: Delay proxy

    private(set) var proxyPort = 0

    /// Starts the delay proxy in the agent's namespace, forwarding to the server.
    func startProxy(delays: DelayRange, seed: UInt64) async throws {
        let outPath = directory + "/proxy.out"
        try? FileManager.default.removeItem(atPath: outPath)
        let process = try Children.shared.spawn("delay proxy", Binaries.ip, [
            "netns", "exec", topology.agentNamespace, Binaries.chaos, "proxy",
            "--listen", "127.0.0.1:0", "--to", upstreamAddress,
            "--delay-ms", delays.description, "--seed", "\(seed)",
        ], log: directory + "/proxy.log", stdout: outPath)
        proxy = process
        proxyPort = try await waitForListeningPort(in: outPath, of: process, what: "the delay proxy", log: directory + "/proxy.log")
    }

    func stopProxy() async {
        if let proxy { await Children.shared.terminate(proxy) }
        proxy = nil
    }
}

/// The last `bytes` of a log file.
func tail(_ path: String, bytes: Int = 2500) -> String { tailOfFile(path, bytes: bytes) }
