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
    let directory: String
    let topology: Topology
    let socketPath: String
    /// Where the server runs and listens: namespace S and its veth address, or (for the
    /// loopback first-connect figure) namespace A and 127.0.0.1.
    private let serverNamespace: String
    private let serverHost: String
    private(set) var serverPort = 0
    private(set) var server: ChildProcess?
    private(set) var daemon: ChildProcess?
    private(set) var proxy: ChildProcess?
    /// When the current daemon process was started, in Unix ms.
    private(set) var daemonStartedMS: Int64 = 0

    /// With the packaged [heartbeat] and [reconnect] defaults (heartbeat
    /// 15–300 s, backoff 1–60 s) rather than the suite's fast ones.
    private let packagedDefaults: Bool

    init(directory: String, topology: Topology, serverOnLoopback: Bool = false, packagedDefaults: Bool = false) throws {
        self.directory = directory
        self.topology = topology
        self.packagedDefaults = packagedDefaults
        serverNamespace = serverOnLoopback ? topology.agentNamespace : topology.serverNamespace
        serverHost = serverOnLoopback ? "127.0.0.1" : topology.serverAddress
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        socketPath = directory + "/imagent.sock"
        try "chaos-token\n".write(toFile: directory + "/token", atomically: true, encoding: .utf8)
    }

    // MARK: Reference server

    /// Starts the server on a free port the first time, the same port and state after; returns when it listens.
    func startServer() async throws {
        let outPath = directory + "/refserver.out"
        try? FileManager.default.removeItem(atPath: outPath)
        let process = try Children.shared.spawn("imagent-refserver", Binaries.ip, [
            "netns", "exec", serverNamespace, Binaries.refserver,
            "--listen", "\(serverHost):\(serverPort)", "--token-file", directory + "/token",
            "--state", directory + "/refserver.sqlite3", "--admin-socket", directory + "/admin.sock",
            "--log-level", "warning",
        ], log: directory + "/refserver.log", stdout: outPath)
        server = process
        serverPort = try await Self.listeningPort(in: outPath, of: process, what: "imagent-refserver", log: directory + "/refserver.log")
    }

    /// `kill -9` the server (it commits before it acknowledges, so nothing acknowledged is lost).
    func killServer() async {
        if let server { await Children.shared.kill9(server) }
    }

    // MARK: Daemon

    enum Route: String {
        case direct
        case proxied
    }

    /// Starts `imagentd` on the configuration for `route`; returns once its socket accepts connections.
    func startDaemon(_ route: Route) async throws {
        let config = directory + "/\(route.rawValue).toml"
        try writeDaemonConfig(config, endpoint: route == .direct ? "\(serverHost):\(serverPort)" : "127.0.0.1:\(proxyPort)")
        // A killed daemon leaves its socket file: waiting for it must mean the new daemon's.
        try? FileManager.default.removeItem(atPath: socketPath)
        daemonStartedMS = wallMS()
        let process = try Children.shared.spawn("imagentd", Binaries.ip, [
            "netns", "exec", topology.agentNamespace, Binaries.daemon, "--config", config,
        ], log: directory + "/imagentd.log")
        daemon = process
        let deadline = Date().addingTimeInterval(30)
        while process.isRunning, Date() < deadline {
            if Self.accepts(socketPath) { return }
            try await Task.sleep(for: .milliseconds(5))
        }
        throw ChaosError("imagentd did not accept connections on \(socketPath) within 30 s (running: \(process.isRunning))")
    }

    func killDaemon() async {
        if let daemon { await Children.shared.kill9(daemon) }
    }

    private func writeDaemonConfig(_ path: String, endpoint: String) throws {
        let timing = packagedDefaults ? "" : """
            [heartbeat]
            min_seconds = 1
            max_seconds = 2
            [reconnect]
            base_ms = 100
            cap_ms = 500

            """
        try """
            [server]
            endpoints = ["\(endpoint)"]
            tls = false
            # The server is in another network namespace on a test-only address.
            allow_plaintext = true
            agent_id = "imagent-chaos"
            [auth]
            token_file = "\(directory)/token"
            [ipc]
            socket = "\(socketPath)"
            mode = "0600"
            [store]
            directory = "\(directory)/store"
            \(timing)[network]
            watch = true
            [log]
            level = "info"

            """.write(toFile: path, atomically: true, encoding: .utf8)
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
            "--listen", "127.0.0.1:0", "--to", "\(serverHost):\(serverPort)",
            "--delay-ms", delays.description, "--seed", "\(seed)",
        ], log: directory + "/proxy.log", stdout: outPath)
        proxy = process
        proxyPort = try await Self.listeningPort(in: outPath, of: process, what: "the delay proxy", log: directory + "/proxy.log")
    }

    func stopProxy() async {
        if let proxy { await Children.shared.terminate(proxy) }
        proxy = nil
    }

    // MARK: Helpers

    /// Waits for the "listening on HOST:PORT" line a program prints first.
    private static func listeningPort(in outPath: String, of process: ChildProcess, what: String, log: String) async throws -> Int {
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline, process.isRunning {
            let out = (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? ""
            if let line = out.split(separator: "\n").first(where: { $0.hasPrefix("listening on ") }),
               let colon = line.lastIndex(of: ":"), let port = Int(line[line.index(after: colon)...]) {
                return port
            }
            try await Task.sleep(for: .milliseconds(5))
        }
        throw ChaosError("\(what) did not start; its log:\n\(tail(log))")
    }

    /// Whether a Unix socket at `path` accepts a connection now.
    static func accepts(_ path: String) -> Bool {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0
            }
        }
    }
}

/// The last `bytes` of a log file.
func tail(_ path: String, bytes: Int = 2500) -> String {
    String(((try? String(contentsOfFile: path, encoding: .utf8)) ?? "(no \(path))").suffix(bytes))
}
