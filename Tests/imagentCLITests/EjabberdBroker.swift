import Foundation
import IMAgentTestKit
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// ejabberd 23.01's `mod_mqtt`, the second MQTT 5 broker of the tests: the kit's `EjabberdNode`
/// on a free loopback port in the test's folder. A test rotates the daemon's password by writing
/// its file (read at every login).
final class TCPEjabberd: @unchecked Sendable {
    /// The user name the daemon logs in with; `backend` logs in with any password.
    static let user = "mqtt-test-host"

    /// Why the ejabberd tests cannot run here, nil when they can.
    static var missing: String? { EjabberdNode.missing }

    let node: EjabberdNode
    let port: UInt16
    private(set) var process: ChildProcess
    var directory: String { node.directory }
    var passwordFile: String { node.passwordFile }
    var log: String { (try? String(contentsOfFile: node.logPath, encoding: .utf8)) ?? "" }

    private init(node: EjabberdNode, port: UInt16, process: ChildProcess) {
        self.node = node
        self.port = port
        self.process = process
    }

    /// Starts ejabberd with `password` as the daemon's; `sessionExpiry` nil leaves mod_mqtt's default (300 s).
    static func start(directory: String, password: String, sessionExpiry: Int? = nil) throws -> TCPEjabberd {
        let port = UInt16(try freeLoopbackPort())
        let node = try EjabberdNode(directory: directory, ip: "127.0.0.1", port: Int(port), user: user, password: password,
                                    sessionExpiry: sessionExpiry)
        let broker = TCPEjabberd(node: node, port: port, process: try launch(node))
        try broker.waitUntilListening()
        return broker
    }

    private static func launch(_ node: EjabberdNode) throws -> ChildProcess {
        try ProgramSpawner.direct.spawn("ejabberd", node.executable, node.arguments, node.outPath, node.outPath, node.setting)
    }

    private func waitUntilListening() throws {
        for _ in 0..<1_500 {
            if canConnect(port: port) { return }
            guard process.isRunning else { break }
            usleep(10_000)
        }
        let output = (try? String(contentsOfFile: node.outPath, encoding: .utf8)) ?? ""
        stop()
        throw RealDaemonError("ejabberd did not listen on 127.0.0.1:\(port) within 15 s: \(output.suffix(2000))\n\(log.suffix(2000))")
    }

    /// SIGTERM, then a new VM on the same folder and port: its MQTT sessions are gone (it keeps them in memory).
    func restart() throws {
        stop()
        process = try Self.launch(node)
        try waitUntilListening()
    }

    /// The daemon's password from now on (read at its next login).
    func setPassword(_ password: String) throws {
        try password.write(toFile: passwordFile, atomically: true, encoding: .utf8)
    }

    func stop() {
        guard process.isRunning else { return }
        process.terminate()  // the Erlang VM stops gracefully on SIGTERM
        for _ in 0..<500 where process.isRunning { usleep(10_000) }
        if process.isRunning {
            process.signal(SIGKILL)
            process.waitUntilExit()
        }
    }
}

/// ejabberd and a daemon logging in to it as `TCPEjabberd.user` with its token; both stopped afterwards.
/// `maxFrame`: the daemon's `[server] max_frame_bytes` (and `[limits] max_payload_bytes`, which may not be larger).
func withEjabberdDaemon(maxFrame: Int? = nil, _ body: (inout RealDaemon, TCPEjabberd) async throws -> Void) async throws {
    let directory = try makeTemporaryDirectory(prefix: "imagent-test")
    var started: TCPEjabberd?
    let (broker, setup): (TCPEjabberd, RealDaemon.Setup)
    do {
        let starting = ContinuousClock.now
        broker = try TCPEjabberd.start(directory: directory, password: "real-daemon-token")
        started = broker
        print("ejabberd: listening \(ContinuousClock.now - starting) after start")
        setup = try await RealDaemon.prepare(.external("127.0.0.1:\(broker.port)"), in: directory) { config in
            config.serverExtra = "protocol = \"mqtt\"" + (maxFrame.map { "\nmax_frame_bytes = \($0)" } ?? "")
            config.extra = """
                [mqtt]
                client_id = "mqtt-test-host"
                username = "\(TCPEjabberd.user)"
                session_expiry_seconds = 3600
                \(maxFrame.map { "[limits]\nmax_payload_bytes = \($0 - 100)" } ?? "")
                """
        }
    } catch {
        started?.stop()
        removeTree(directory)
        throw error
    }
    try await withRealDaemon(setup, companions: [broker]) { daemon in
        try await body(&daemon, broker)
    }
}

extension TCPEjabberd: Companion {
    var name: String { "ejabberd" }
}

/// Publishes QoS 1 messages to the broker as user `backend` with paho-mqtt (the python3 on PATH),
/// one (topic, imagent-seq, size) each, in order, and waits for every PUBACK.
func publishDown(port: UInt16, _ messages: [(topic: String, seq: Int, size: Int)], directory: String) throws {
    let script = """
        import sys, time, paho.mqtt.client as mqtt
        from paho.mqtt.properties import Properties
        from paho.mqtt.packettypes import PacketTypes
        client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="imagent-test-publisher", protocol=mqtt.MQTTv5)
        client.username_pw_set("backend", "any")
        client.connect("127.0.0.1", \(port))
        client.loop_start()
        infos = []
        for topic, seq, size in [\(messages.map { "(\"\($0.topic)\", \($0.seq), \($0.size))" }.joined(separator: ", "))]:
            properties = Properties(PacketTypes.PUBLISH)
            properties.UserProperty = ("imagent-seq", str(seq))
            infos.append(client.publish(topic, b"x" * size, qos=1, properties=properties))
        for info in infos:
            info.wait_for_publish(timeout=10)
        client.disconnect()
        client.loop_stop()
        print("published", len(infos))
        """
    try script.write(toFile: directory + "/publish.py", atomically: true, encoding: .utf8)
    let publisher = try ChildProcess(executable: "/usr/bin/env", arguments: ["python3", directory + "/publish.py"],
                                     stdout: .file(directory + "/publish.log", append: true), stderr: .file(directory + "/publish.log", append: true))
    publisher.waitUntilExit()
    let output = (try? String(contentsOfFile: directory + "/publish.log", encoding: .utf8)) ?? ""
    guard output.contains("published \(messages.count)") else { throw RealDaemonError("the publisher failed: \(output)") }
}

/// `examples/mqtt-echo/echo.py` on ejabberd, which has no shared subscriptions: the same backend
/// with a plain subscription to the `up` topics, logged in as `backend`. Stop it with `terminate`.
func startEjabberdEcho(port: UInt16, directory: String) throws -> ChildProcess {
    let script = directory + "/echo-plain.py"
    try EjabberdNode.plainSubscriptionEcho(try String(contentsOfFile: EchoBackend.script, encoding: .utf8))
        .write(toFile: script, atomically: true, encoding: .utf8)
    let log = directory + "/echo.log"
    let process = try ChildProcess(executable: "/usr/bin/env",
                                   arguments: ["python3", script, "--port", "\(port)", "--client-id", "echo-\(getpid())",
                                               "--username", "backend", "--password", "any"],
                                   stdout: .file(log, append: true), stderr: .file(log, append: true))
    for _ in 0..<500 where process.isRunning {
        if ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").contains("subscribed") { return process }
        usleep(10_000)
    }
    process.terminate()
    process.waitUntilExit()
    throw RealDaemonError("the echo backend did not subscribe within 5 s: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
}
