import AgentIPC
import Foundation
import IMAgentTestKit
import NIOCore
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The exactly-once test's count each way: 5,000 in CI; `IMAGENT_MQTT_MESSAGES=100000`
/// for the issue's full run (BENCHMARKS.md, "MQTT upstream").
let mqttExactlyOnceMessages = ProcessInfo.processInfo.environment["IMAGENT_MQTT_MESSAGES"].flatMap(Int.init) ?? 5_000

/// The real `imagentd` with `[server] protocol = "mqtt"` against a real
/// broker: Debian's mosquitto 2.x on a loopback TCP port with persistence on,
/// and the example backend `examples/mqtt-echo/echo.py` (paho-mqtt) answering
/// on `down`. Both are started per test and ended in `stop`.
@Suite(.serialized, .timeLimit(.minutes(mqttExactlyOnceMessages > 5_000 ? 90 : 4)))
struct MQTTUpstreamTests {
    @Test func echoThroughMosquitto_everyMessageOnceInOrder() async throws {
        try await withMQTTDaemon { daemon, broker, _ in
            _ = try await daemon.waitForLink("connected")
            let session = try await open(daemon)
            let sent = try await daemon.imagent(["send", "\(session)", "--lines"], stdin: lines(1...200))
            #expect(sent.status == 0, "\(sent.stderr)")
            let received = try await listen(daemon, session, count: 200, after: 0)
            #expect(received.map(\.seq) == Array(1...200), "\(received.count) received")
            #expect(received.allSatisfy { $0.text == "m\($0.seq)" })
            #expect(broker.log.contains("imagent/mqtt-test-host/+/+/down"), "the daemon subscribed to its down filter")
        }
    }

    /// Large payloads leave as PUBLISH heads followed by the payload's own buffer: mosquitto and
    /// the echo backend hand each back byte for byte.
    @Test func largePayloads_echoByteExactThroughMosquitto() async throws {
        try await withMQTTDaemon { daemon, _, _ in
            _ = try await daemon.waitForLink("connected")
            try await expectLargeEchoesByteExact(socketPath: daemon.socketPath)
        }
    }

    /// A message the broker's Maximum Packet Size can never let through fails alone at once
    /// (EXPIRED, PAYLOAD_TOO_LARGE); the link and the messages around it go on.
    @Test func aMessageAboveTheBrokersMaximumPacketSize_failsAlone() async throws {
        try await withMQTTDaemon(brokerExtra: "max_packet_size 4096") { daemon, _, _ in
            _ = try await daemon.waitForLink("connected")
            try await expectOversizedMessageFailsAlone(socketPath: daemon.socketPath, size: 5_000,
                                                       limit: "the broker's Maximum Packet Size")
        }
    }

    /// `imagent status` in plain text shows what mosquitto granted, the same figures as STATUS's
    /// `link.mqtt_broker`, and says that a message of `max_payload_bytes` cannot pass its packet size.
    @Test func plainStatus_showsWhatMosquittoGranted() async throws {
        try await withMQTTDaemon(brokerExtra: "max_packet_size 4096\nmax_inflight_messages 7") { daemon, _, _ in
            let status = try await daemon.waitForLink("connected")
            let granted = try #require((status["link"] as? [String: Any])?["mqtt_broker"] as? [String: Any], "\(status)")
            #expect(granted["receive_maximum"] as? Int == 7 && granted["maximum_packet_size"] as? Int == 4_096, "\(granted)")
            let human = try await daemon.imagent(["status"])
            #expect(human.status == 0, "\(human.stderr)")
            let lines = human.stdout.split(separator: "\n").map(String.init)
            func line(_ label: String) -> String { lines.first { $0.hasPrefix(label + ":") } ?? "(no \(label) line in \(human.stdout))" }
            #expect(line("mqtt broker").contains("receive maximum 7, topic aliases \(granted["topic_alias_maximum"] as? Int ?? -1), "
                + "retain yes, shared subscriptions yes"), "\(human.stdout)")
            #expect(line("session expiry").hasSuffix(" 600 s granted"), "mosquitto grants what CONNECT asks: \(human.stdout)")
            #expect(line("packet size").contains("at most 4 KiB, largest message ")
                && line("packet size").hasSuffix("less than [limits] max_payload_bytes, larger messages fail with PAYLOAD_TOO_LARGE"),
                "\(human.stdout)")
        }
    }

    /// TLS to the broker with the daemon's client certificate (the broker requires one and takes its
    /// CN as the user name), verified for `server_name`: the echo still comes back.
    @Test func echoOverTLS_withAClientCertificate() async throws {
        let listener: (String, UInt16) throws -> String = { directory, port in
            let script = """
                set -e
                cd '\(directory)'
                openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.pem \\
                  -days 2 -subj '/CN=imagent mqtt test CA' \\
                  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
                openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout broker.key -out broker.csr -subj '/CN=mqtt.test'
                printf 'subjectAltName=DNS:mqtt.test\\nbasicConstraints=CA:FALSE\\nextendedKeyUsage=serverAuth\\n' > broker.cnf
                openssl x509 -req -in broker.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out broker.pem -days 2 -extfile broker.cnf
                openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout client.key -out client.csr -subj '/CN=mqtt-test-host'
                printf 'basicConstraints=CA:FALSE\\nextendedKeyUsage=clientAuth\\n' > client.cnf
                openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 2 -extfile client.cnf
                chmod 0600 client.key
                """
            let openssl = try ChildProcess(executable: "/bin/sh", arguments: ["-c", script], stdout: .null, stderr: .null)
            openssl.waitUntilExit()
            guard access(directory + "/client.pem", R_OK) == 0 else { throw RealDaemonError("openssl could not make the test certificates") }
            return """
                listener \(port) 127.0.0.1
                cafile \(directory)/ca.pem
                certfile \(directory)/broker.pem
                keyfile \(directory)/broker.key
                require_certificate true
                use_identity_as_username true
                """
        }
        let daemon: (String, String) -> String = { text, directory in
            text + """

                [server.tls]
                ca_file = "\(directory)/ca.pem"
                server_name = "mqtt.test"
                certificate_file = "\(directory)/client.pem"
                private_key_file = "\(directory)/client.key"
                """
        }
        try await withMQTTDaemon(tls: (listener, daemon)) { daemon, broker, _ in
            _ = try await daemon.waitForLink("connected")
            let session = try await open(daemon)
            let sent = try await daemon.imagent(["send", "\(session)", "--lines"], stdin: lines(1...50))
            #expect(sent.status == 0, "\(sent.stderr)")
            let received = try await listen(daemon, session, count: 50, after: 0)
            #expect(received.map(\.seq) == Array(1...50), "\(received.count) received")
            #expect(received.allSatisfy { $0.text == "m\($0.seq)" })
            #expect(broker.log.contains("u'mqtt-test-host'"), "the broker took the client certificate's CN as the user name")
        }
    }

    /// 5,000 messages each way (CI size; `IMAGENT_MQTT_MESSAGES` sets another) across two `kill -9`
    /// of the daemon, two broker restarts and two link drops: 0 lost, 0 duplicated, 0 reordered
    /// at the local program.
    @Test func exactlyOnce_acrossKillNine_brokerRestarts_andLinkDrops() async throws {
        let total = mqttExactlyOnceMessages
        let fifth = total / 5
        // Read timeouts grow with the count (5,000 → 60 s and 90 s, as before).
        let readTimeout = max(60, total / 80)
        try await withMQTTDaemon { daemon, broker, backend in
            _ = try await daemon.waitForLink("connected")
            let session = try await open(daemon)
            let started = ContinuousClock.now

            // 1. Two fifths accepted (stored), then kill -9 at once: most are still in the outbox.
            try await send(daemon, session, 1...2 * fifth)
            daemon.signal(SIGKILL)
            _ = await daemon.waitForExit(within: .seconds(5))
            daemon = try await daemon.restarted()

            // 2. The broker restarts (persistence on) while the daemon resends.
            try await Task.sleep(for: .milliseconds(300))
            try broker.restart()
            _ = try await daemon.waitForLink("connected", within: .seconds(30))

            // 3. Three fifths more, with the link dropped twice in the middle: once by the daemon
            //    (`imagent reconnect`), once under it (every TCP socket to the broker destroyed, `ss -K`:
            //    the backend's too).
            for (index, chunk) in [2 * fifth + 1...3 * fifth, 3 * fifth + 1...4 * fifth, 4 * fifth + 1...total].enumerated() {
                try await send(daemon, session, chunk)
                if index == 0 {
                    let dropped = try await daemon.imagent(["reconnect"])
                    #expect(dropped.status == 0, "\(dropped.stderr)")
                } else if index == 1 {
                    let before = try await reconnects(daemon)
                    let ss = try ChildProcess(executable: "/usr/bin/ss", arguments: ["-K", "dst", "127.0.0.1", "dport", "=", "\(broker.port)"],
                                              stdout: .null, stderr: .null)
                    ss.waitUntilExit()
                    var after = before
                    let deadline = ContinuousClock.now + .seconds(15)
                    while after == before, ContinuousClock.now < deadline {
                        try await Task.sleep(for: .milliseconds(100))
                        after = try await reconnects(daemon)
                    }
                    #expect(after > before, "the link was never cut (reconnects \(before) → \(after))")
                }
            }

            // 4. Read half, kill -9, restart the broker once more, read the rest.
            var received = try await listen(daemon, session, count: total / 2, after: 0, timeout: readTimeout)
            daemon.signal(SIGKILL)
            _ = await daemon.waitForExit(within: .seconds(5))
            try broker.restart()
            daemon = try await daemon.restarted()
            received += try await listen(daemon, session, count: total - total / 2, after: received.last?.seq ?? 0,
                                         timeout: readTimeout * 3 / 2)

            let seqs = received.map(\.seq)
            let missing = Set(1...UInt64(total)).subtracting(seqs).count
            let duplicated = seqs.count - Set(seqs).count
            let reordered = zip(seqs, seqs.dropFirst()).filter { $0 >= $1 }.count
            #expect(missing == 0 && duplicated == 0 && reordered == 0,
                    "\(missing) lost, \(duplicated) duplicated, \(reordered) out of order; daemon log:\n\(daemon.log.suffix(3000))\nbroker log:\n\(broker.log.suffix(3000))\necho log:\n\(backend.log.suffix(1000))")
            #expect(received.allSatisfy { $0.text == "m\($0.seq)" }, "a payload arrived under the wrong seq")
            #expect(backend.isRunning, "the echo backend died: \(backend.log.suffix(2000))")
            print("mqtt exactly-once: \(total) each way, \(received.count) received, \(missing) lost, \(duplicated) duplicated, \(reordered) reordered, across 2 kill -9, 2 broker restarts, 2 link drops, in \(ContinuousClock.now - started)")
        }
    }

    private func open(_ daemon: RealDaemon) async throws -> UInt64 {
        let opened = try await daemon.imagent(["open", "echo", "--json"])
        return try #require(((try JSONSerialization.jsonObject(with: Data(opened.stdout.utf8)) as? [String: Any])?["session"] as? NSNumber)?.uint64Value,
                            "open: \(opened.stdout) \(opened.stderr)")
    }

    /// `imagent send --lines` of `m1`…: in calls of at most 5,000 lines, each allowed 2 minutes.
    private func send(_ daemon: RealDaemon, _ session: UInt64, _ range: ClosedRange<Int>) async throws {
        for start in stride(from: range.lowerBound, through: range.upperBound, by: 5_000) {
            let result = try await ImagentProcess.run(["--socket", daemon.socketPath, "send", "\(session)", "--lines"],
                                                      stdin: lines(start...min(start + 4_999, range.upperBound)), limit: .seconds(120))
            #expect(result.status == 0, "\(result.stderr)")
        }
    }

    private func reconnects(_ daemon: RealDaemon) async throws -> Int {
        let status = try await daemon.waitForLink("connected")
        let link = try #require(status["link"] as? [String: Any], "no link in \(status)")
        return try #require((link["reconnects"] as? NSNumber)?.intValue, "no reconnects in \(status)")
    }

    private func lines(_ range: ClosedRange<Int>) -> String {
        range.map { "m\($0)\n" }.joined()
    }

    private func listen(_ daemon: RealDaemon, _ session: UInt64, count: Int, after: UInt64,
                        timeout: Int = 60) async throws -> [(seq: UInt64, text: String)] {
        // The child is allowed a little longer than its own --timeout.
        let result = try await ImagentProcess.run(["--socket", daemon.socketPath, "--timeout", "\(timeout)", "listen", "\(session)",
                                                   "--count", "\(count)", "--from-seq", "\(after + 1)", "--json"],
                                                  limit: .seconds(timeout + 15))
        #expect(result.status == 0, "\(result.stderr)\n\(daemon.log.suffix(3000))")
        return result.stdoutLines.compactMap { line in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  let seq = (object["seq"] as? NSNumber)?.uint64Value, let text = object["text"] as? String else { return nil }
            return (seq, text)
        }
    }
}

/// A broker, the echo backend and a daemon speaking MQTT to the broker; all stopped afterwards.
/// `tls`: the daemon's endpoint is a second listener of the broker, set up by `tls.listener`
/// (given the folder and its port), and `tls.daemon` (given the file without `tls = false`, and the folder)
/// turns TLS on in the daemon's file.
/// `brokerFiles` is given the folder and returns more of mosquitto.conf (files it wrote there); `daemonExtra` goes
/// at the end of the daemon's file, inside `[mqtt]`.
func withMQTTDaemon(brokerExtra: String = "", brokerFiles: (String) throws -> String = { _ in "" }, daemonExtra: String = "",
                    socketMode: String = "0600", tls: (listener: (String, UInt16) throws -> String, daemon: (String, String) -> String)? = nil,
                    _ body: (inout RealDaemon, TCPMosquitto, EchoBackend) async throws -> Void) async throws {
    let directory = try makeTemporaryDirectory(prefix: "imagent-test")
    var started: [any Companion] = []
    let (broker, backend, setup): (TCPMosquitto, EchoBackend, RealDaemon.Setup)
    do {
        let tlsPort = UInt16(try freeLoopbackPort())
        broker = try TCPMosquitto.start(directory: directory,
                                        extra: brokerExtra + "\n" + (try brokerFiles(directory)) + "\n"
                                            + (try tls.map { try $0.listener(directory, tlsPort) } ?? ""))
        started.append(broker)
        // The same file as for IMLink, pointed at the broker: the token file stays, as the password.
        setup = try await RealDaemon.prepare(.external("127.0.0.1:\(tls == nil ? broker.port : tlsPort)"), in: directory) { config in
            config.serverExtra = "protocol = \"mqtt\""
            config.socketMode = socketMode
            config.extra = """
                [mqtt]
                client_id = "mqtt-test-host"
                session_expiry_seconds = 600
                \(daemonExtra)
                """
        }
        if let tls { try setup.editConfig { tls.daemon($0.replacingOccurrences(of: "tls = false\n", with: ""), directory) } }
        backend = try EchoBackend.start(port: broker.port, log: directory + "/echo.log")
    } catch {
        started.forEach { $0.stop() }
        removeTree(directory)
        throw error
    }
    try await withRealDaemon(setup, companions: [backend, broker]) { daemon in
        try await body(&daemon, broker, backend)
    }
}

extension TCPMosquitto: Companion {
    var name: String { "mosquitto" }
}

extension EchoBackend: Companion {
    var name: String { "echo backend" }
}

/// mosquitto on 127.0.0.1 at a free port, persistence on, no queue limits (its
/// default of 1,000 queued messages per client drops PUBACKed messages).
final class TCPMosquitto: @unchecked Sendable {
    let directory: String
    let port: UInt16
    private(set) var process: ChildProcess
    var log: String { (try? String(contentsOfFile: directory + "/mosquitto.log", encoding: .utf8)) ?? "" }

    private init(directory: String, port: UInt16, process: ChildProcess) {
        self.directory = directory
        self.port = port
        self.process = process
    }

    /// `extra`: more of mosquitto.conf (another listener, say).
    static func start(directory: String, extra: String = "") throws -> TCPMosquitto {
        let executable = "/usr/sbin/mosquitto"
        guard access(executable, X_OK) == 0 else {
            throw RealDaemonError("\(executable) is missing: run scripts/bootstrap (it installs Debian's mosquitto)")
        }
        let port = UInt16(try freeLoopbackPort())
        try """
            listener \(port) 127.0.0.1
            allow_anonymous true
            persistence true
            persistence_location \(directory)/
            max_queued_messages 0
            user root
            log_dest file \(directory)/mosquitto.log
            log_type error
            log_type warning
            log_type notice
            log_type information
            log_type subscribe
            \(extra)
            """.write(toFile: directory + "/mosquitto.conf", atomically: true, encoding: .utf8)
        let broker = TCPMosquitto(directory: directory, port: port, process: try launch(directory))
        try broker.waitUntilListening()
        return broker
    }

    private static func launch(_ directory: String) throws -> ChildProcess {
        try ChildProcess(executable: "/usr/sbin/mosquitto", arguments: ["-c", directory + "/mosquitto.conf"],
                         stdout: .null, stderr: .null)
    }

    private func waitUntilListening() throws {
        for _ in 0..<500 {
            if canConnect(port: port) { return }
            usleep(10_000)
        }
        stop()
        throw RealDaemonError("mosquitto did not listen on 127.0.0.1:\(port) within 5 s")
    }

    /// SIGTERM (mosquitto writes its persistence file), then a new process on the same file and port.
    func restart() throws {
        stop()
        process = try Self.launch(directory)
        try waitUntilListening()
    }

    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        for _ in 0..<500 where process.isRunning { usleep(10_000) }
        if process.isRunning {
            process.signal(SIGKILL)
            process.waitUntilExit()
        }
    }
}

/// `examples/mqtt-echo/echo.py` as a child process.
final class EchoBackend: @unchecked Sendable {
    let process: ChildProcess
    let logPath: String
    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }
    var isRunning: Bool { process.isRunning }

    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("examples/mqtt-echo/echo.py").path

    private init(process: ChildProcess, logPath: String) {
        self.process = process
        self.logPath = logPath
    }

    static func start(port: UInt16, log: String) throws -> EchoBackend {
        // The python3 on PATH, which scripts/bootstrap gave paho-mqtt 2.x.
        let process = try ChildProcess(executable: "/usr/bin/env", arguments: ["python3", script, "--port", "\(port)", "--client-id", "echo-\(getpid())"],
                                       stdout: .file(log, append: true), stderr: .file(log, append: true))
        let backend = EchoBackend(process: process, logPath: log)
        for _ in 0..<500 where !backend.log.contains("subscribed") && process.isRunning {
            usleep(10_000)
        }
        guard backend.log.contains("subscribed") else {
            backend.stop()
            throw RealDaemonError("the echo backend did not subscribe within 5 s: \(backend.log)")
        }
        return backend
    }

    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        for _ in 0..<300 where process.isRunning { usleep(10_000) }
        if process.isRunning {
            process.signal(SIGKILL)
            process.waitUntilExit()
        }
    }
}

func canConnect(port: UInt16) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = port.bigEndian
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
    }
}
