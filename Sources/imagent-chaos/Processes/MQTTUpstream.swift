import ArgumentParser
import Foundation
import IMAgentTestKit

/// What the daemon talks to in a run: the reference server (IMLink/1) or an
/// MQTT 5 broker with the example echo backend (imagent-mqtt(7)).
enum Upstream: String, ExpressibleByArgument, CaseIterable, Sendable {
    case imlink
    case mqtt
}

/// Debian's mosquitto (persistence on, no queue limits, Nagle off as imagent-mqtt(7) advises)
/// and `examples/mqtt-echo/echo.py` in the server's namespace; the daemon reaches the broker on `host:1883`.
///
/// mosquitto writes its persistence file only when it shuts down (or at its autosave
/// interval), so a `kill -9` loses what it had PUBACKed: the server fault is a SIGTERM
/// and a restart here, not a `kill -9`.
final class MQTTUpstream: @unchecked Sendable {
    static let port = 1883
    let directory: String
    let host: String
    let namespace: String
    private(set) var broker: ChildProcess?
    private(set) var backend: ChildProcess?

    var address: String { "\(host):\(Self.port)" }
    var logPath: String { directory + "/mosquitto.log" }

    /// The example backend: beside the sources, or under the current directory (`scripts/chaos` runs from the top).
    static var echoScript: String {
        let beside = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("examples/mqtt-echo/echo.py").path
        return FileManager.default.fileExists(atPath: beside) ? beside : "examples/mqtt-echo/echo.py"
    }

    init(directory: String, host: String, namespace: String) throws {
        self.directory = directory
        self.host = host
        self.namespace = namespace
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

    /// Starts the broker (same port and persistence file every time), then the backend the first time.
    func start() async throws {
        broker = try Children.shared.spawn("mosquitto", Binaries.ip,
                                           ["netns", "exec", namespace, "/usr/sbin/mosquitto", "-c", directory + "/mosquitto.conf"],
                                           log: directory + "/mosquitto.out")
        try await waitUntilListening()
        guard backend?.isRunning != true else { return }
        let log = directory + "/echo.log"
        backend = try Children.shared.spawn("echo backend", Binaries.ip, [
            "netns", "exec", namespace, "/usr/bin/env", "python3", Self.echoScript,
            "--host", "127.0.0.1", "--port", "\(Self.port)", "--client-id", "chaos-echo",
        ], log: log)
        for _ in 0..<1000 {
            if tail(log).contains("subscribed") { return }
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
        for _ in 0..<100 {
            let listening = Shell.run("ip netns exec \(namespace) ss -Hltn 'sport = :\(Self.port)'", quiet: true).output
            if !listening.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty { return }
            guard broker?.isRunning == true else { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw ChaosError("mosquitto did not listen on port \(Self.port) in \(namespace) within 5 s: \(tail(logPath)) \(tail(directory + "/mosquitto.out"))")
    }
}
