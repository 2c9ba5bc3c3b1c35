import ArgumentParser
import Foundation
import IMAgentTestKit

/// What the daemon talks to in a run: the reference server (IMLink/1) or an
/// MQTT 5 broker with the example echo backend (imagent-mqtt(7)).
enum Upstream: String, ExpressibleByArgument, CaseIterable, Sendable {
    case imlink
    case mqtt
}

/// Which MQTT 5 broker `--upstream mqtt` runs.
enum MQTTBroker: String, ExpressibleByArgument, CaseIterable, Sendable {
    /// Debian's mosquitto 2, persistence on.
    case mosquitto
    /// ejabberd 23.01's mod_mqtt (the kit's `EjabberdNode`): sessions in memory, no shared
    /// subscriptions, one unacknowledged message at a time.
    case ejabberd
}

/// The broker and `examples/mqtt-echo/echo.py` in the server's namespace; the daemon reaches the broker on `host:1883`.
///
/// mosquitto (persistence on, no queue limits, Nagle off as imagent-mqtt(7) advises) writes its
/// persistence file only when it shuts down (or at its autosave interval), so a `kill -9` loses what
/// it had PUBACKed: its server fault is a SIGTERM and a restart, not a `kill -9`. ejabberd holds its
/// sessions in memory only, so any restart loses what it had PUBACKed: its server fault is the echo
/// backend's `kill -9` and restart instead (its session, with the messages for it, stays at the broker).
final class MQTTUpstream: @unchecked Sendable {
    static let port = 1883
    /// The daemon's user name and password at ejabberd (mosquitto lets anyone in).
    static let ejabberdUser = "imagent-chaos"
    let directory: String
    let host: String
    let namespace: String
    let kind: MQTTBroker
    private let ejabberd: EjabberdNode?
    private(set) var broker: ChildProcess?
    private(set) var backend: ChildProcess?

    var address: String { "\(host):\(Self.port)" }
    var logPath: String { ejabberd?.logPath ?? directory + "/mosquitto.log" }
    var name: String { kind.rawValue }

    /// The example backend: beside the sources, or under the current directory (`scripts/chaos` runs from the top).
    static var echoScript: String {
        let beside = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("examples/mqtt-echo/echo.py").path
        return FileManager.default.fileExists(atPath: beside) ? beside : "examples/mqtt-echo/echo.py"
    }

    init(directory: String, host: String, namespace: String, broker kind: MQTTBroker, password: String) throws {
        self.directory = directory
        self.host = host
        self.namespace = namespace
        self.kind = kind
        if kind == .ejabberd {
            ejabberd = try EjabberdNode(directory: directory, ip: "0.0.0.0", port: Self.port, user: Self.ejabberdUser,
                                        password: password, sessionExpiry: 3600)
            try EjabberdNode.plainSubscriptionEcho(try String(contentsOfFile: Self.echoScript, encoding: .utf8))
                .write(toFile: echoPath, atomically: true, encoding: .utf8)
            return
        }
        ejabberd = nil
        guard access("/usr/sbin/mosquitto", X_OK) == 0 else {
            throw ChaosError("/usr/sbin/mosquitto is missing: run scripts/bootstrap (it installs Debian's mosquitto)")
        }
        try """
            listener \(Self.port)
            allow_anonymous true
            persistence true
            persistence_location \(directory)/
            max_queued_messages 0
            set_tcp_nodelay true
            user root
            log_dest file \(logPath)
            log_type error
            log_type warning
            log_type notice
            """.write(toFile: directory + "/mosquitto.conf", atomically: true, encoding: .utf8)
    }

    /// The echo backend that runs: the example itself, or its copy with a plain subscription for ejabberd.
    private var echoPath: String { kind == .ejabberd ? directory + "/echo-plain.py" : Self.echoScript }

    /// Starts the broker (same port and persistence file every time), then the backend the first time.
    func start() async throws {
        if let ejabberd {
            broker = try Children.shared.spawner.spawn("ejabberd", Binaries.ip, ["netns", "exec", namespace, ejabberd.executable] + ejabberd.arguments,
                                                       ejabberd.outPath, ejabberd.outPath, ejabberd.setting)
        } else {
            broker = try Children.shared.spawn("mosquitto", Binaries.ip,
                                               ["netns", "exec", namespace, "/usr/sbin/mosquitto", "-c", directory + "/mosquitto.conf"],
                                               log: directory + "/mosquitto.out")
        }
        try await waitUntilListening()
        guard backend?.isRunning != true else { return }
        try await startBackend()
    }

    /// `kill -9` the echo backend, then the same client id again: the broker kept its session and what is queued for it.
    func killAndRestartBackend() async throws {
        if let backend { await Children.shared.kill9(backend) }
        try await startBackend()
    }

    private func startBackend() async throws {
        let log = directory + "/echo.log"
        // Only a "subscribed" written after this start counts (a restart appends to the same log).
        let before = (try? FileManager.default.attributesOfItem(atPath: log)[.size] as? Int) ?? 0
        backend = try Children.shared.spawn("echo backend", Binaries.ip, [
            "netns", "exec", namespace, "/usr/bin/env", "python3", echoPath,
            "--host", "127.0.0.1", "--port", "\(Self.port)", "--client-id", "chaos-echo",
        ] + (kind == .ejabberd ? ["--username", "backend", "--password", "any"] : []), log: log)
        for _ in 0..<1000 {
            if let text = FileManager.default.contents(atPath: log), String(decoding: text.dropFirst(before), as: UTF8.self).contains("subscribed") {
                return
            }
            guard backend?.isRunning == true else { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw ChaosError("the echo backend did not subscribe within 10 s: \(tail(log))")
    }

    /// SIGTERM the broker (it writes its persistence file), SIGKILL after 5 s.
    func stopBroker() async {
        if let broker { await Children.shared.terminate(broker) }
    }

    func stop() async {
        if let backend { await Children.shared.terminate(backend) }
        await stopBroker()
    }

    private func waitUntilListening() async throws {
        for _ in 0..<(kind == .ejabberd ? 300 : 100) {
            let listening = Shell.run("ip netns exec \(namespace) ss -Hltn 'sport = :\(Self.port)'", quiet: true).output
            if !listening.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty { return }
            guard broker?.isRunning == true else { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw ChaosError("\(name) did not listen on port \(Self.port) in \(namespace) within \(kind == .ejabberd ? 15 : 5) s: "
            + "\(tail(logPath)) \(tail(ejabberd?.outPath ?? directory + "/mosquitto.out"))")
    }
}
