import Foundation
import IMAgentTestKit
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A token rotated on the broker (issue 30): mosquitto answers the old password with CONNACK 0x87,
/// the daemon keeps trying with what its token file holds, and the link is back within one backoff
/// cap (this suite's daemon: 1 s) of the new token appearing there, with no command typed and
/// nothing sent meanwhile lost.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct MQTTTokenRotationTests {
    static let user = "mqtt-test-host"

    @Test func brokerRotatesFirst_thenTheTokenFile_linkBackWithinTheCap_nothingLost() async throws {
        try await withPasswordBroker { daemon, broker, tokenFile in
            _ = try await daemon.waitForLink("connected")
            let session = try await openEcho(daemon)
            try await sendLines(daemon, session, 1...20)
            #expect(try await listenSeqs(daemon, session, count: 20, after: 0) == Array(1...20))

            // The broker takes only the new password; the link is cut under the daemon (as a broker
            // restart or a network change would): the cached token is refused.
            try Self.setPassword(broker, "rotated-token")
            Self.cutLinks(to: broker.port)
            let refused = try await waitForStatus(daemon, within: .seconds(20)) { link in
                (link["last_error"] as? String)?.contains("0x87") == true ? link : nil
            }
            let message = refused["last_error"] as? String ?? ""
            #expect(message.contains("check that the [auth] token") && message.contains("mqtt-test-host"), "what to check: \(message)")
            // Messages sent while refused wait in the store.
            try await sendLines(daemon, session, 21...40)
            try await Task.sleep(for: .seconds(3))
            let waiting = try await daemon.imagent(["status", "--json"])
            #expect(!waiting.stdout.contains("\"stopped\""), "a refused login never stops the link: \(waiting.stdout)")

            try "rotated-token\n".write(toFile: tokenFile, atomically: true, encoding: .utf8)
            let appeared = ContinuousClock.now
            _ = try await daemon.waitForLink("connected", within: .seconds(10))
            let back = ContinuousClock.now - appeared
            // One cap (1 s), plus a connect and the status poll.
            #expect(back < .seconds(3), "the link came back \(back) after the new token appeared")
            #expect(try await listenSeqs(daemon, session, count: 20, after: 20) == Array(21...40))
            print("mqtt token rotation (broker first): link back \(back) after the token file changed")
        }
    }

    @Test func tokenFileRotatesFirst_theRefusedCachedTokenIsReadAgain_andConnectsAtOnce() async throws {
        try await withPasswordBroker { daemon, broker, tokenFile in
            _ = try await daemon.waitForLink("connected")
            let session = try await openEcho(daemon)
            // The new token lands while the link is up (the daemon keeps its cached one), then the broker follows.
            try "rotated-token\n".write(toFile: tokenFile, atomically: true, encoding: .utf8)
            try Self.setPassword(broker, "rotated-token")
            Self.cutLinks(to: broker.port)
            try await sendLines(daemon, session, 1...10)
            let deadline = ContinuousClock.now + .seconds(15)
            while !daemon.log.contains("holds a different token than the one the server refused"), ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(daemon.log.contains("holds a different token than the one the server refused"),
                    "the refused token was read again at once:\n\(daemon.log.suffix(3000))")
            _ = try await daemon.waitForLink("connected", within: .seconds(10))
            #expect(try await listenSeqs(daemon, session, count: 10, after: 0) == Array(1...10))
        }
    }

    // MARK: Helpers

    /// mosquitto with a password file holding the daemon's current token for `user`, anonymous
    /// clients (the echo backend) still let in; the daemon logs in as `user`.
    private func withPasswordBroker(_ body: (RealDaemon, TCPMosquitto, String) async throws -> Void) async throws {
        try await withMQTTDaemon(brokerFiles: { directory in
            try Self.mosquittoPasswd(directory + "/mosquitto.passwd", password: "real-daemon-token")
            return "password_file \(directory)/mosquitto.passwd"
        }, daemonExtra: "username = \"\(Self.user)\"") { daemon, broker, _ in
            try await body(daemon, broker, daemon.directory + "/token")
        }
    }

    static func mosquittoPasswd(_ file: String, password: String) throws {
        let tool = try ChildProcess(executable: "/usr/bin/mosquitto_passwd", arguments: ["-b", "-c", file, user, password],
                                    stdout: .null, stderr: .null)
        tool.waitUntilExit()
        guard access(file, R_OK) == 0 else { throw RealDaemonError("mosquitto_passwd did not write \(file)") }
    }

    /// The broker's password file now holds only `password`, read again on SIGHUP.
    static func setPassword(_ broker: TCPMosquitto, _ password: String) throws {
        try mosquittoPasswd(broker.directory + "/mosquitto.passwd", password: password)
        broker.process.signal(SIGHUP)
        let deadline = ContinuousClock.now + .seconds(5)
        while !broker.log.contains("Reloading config"), ContinuousClock.now < deadline { usleep(20_000) }
    }

    /// Every TCP socket to the broker destroyed (`ss -K`), the echo backend's too (it reconnects).
    static func cutLinks(to port: UInt16) {
        let ss = try? ChildProcess(executable: "/usr/bin/ss", arguments: ["-K", "dst", "127.0.0.1", "dport", "=", "\(port)"],
                                   stdout: .null, stderr: .null)
        ss?.waitUntilExit()
    }
}

func openEcho(_ daemon: RealDaemon) async throws -> UInt64 {
    let opened = try await daemon.imagent(["open", "echo", "--json"])
    return try #require(((try JSONSerialization.jsonObject(with: Data(opened.stdout.utf8)) as? [String: Any])?["session"] as? NSNumber)?.uint64Value,
                        "open: \(opened.stdout) \(opened.stderr)")
}

func sendLines(_ daemon: RealDaemon, _ session: UInt64, _ range: ClosedRange<Int>) async throws {
    let sent = try await daemon.imagent(["send", "\(session)", "--lines"], stdin: range.map { "m\($0)\n" }.joined())
    #expect(sent.status == 0, "\(sent.stderr)")
}

func listenSeqs(_ daemon: RealDaemon, _ session: UInt64, count: Int, after: UInt64, timeout: Int = 30) async throws -> [UInt64] {
    let result = try await ImagentProcess.run(["--socket", daemon.socketPath, "--timeout", "\(timeout)", "listen", "\(session)",
                                               "--count", "\(count)", "--from-seq", "\(after + 1)", "--json"],
                                              limit: .seconds(timeout + 15))
    #expect(result.status == 0, "\(result.stderr)\n\(daemon.log.suffix(3000))")
    return result.stdoutLines.compactMap { line in
        (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["seq"].flatMap { ($0 as? NSNumber)?.uint64Value }
    }
}

/// Polls `imagent status --json` until `match` accepts its `link` object.
func waitForStatus(_ daemon: RealDaemon, within limit: Duration,
                   _ match: ([String: Any]) -> [String: Any]?) async throws -> [String: Any] {
    var last = ""
    let deadline = ContinuousClock.now + limit
    while ContinuousClock.now < deadline {
        let result = try await daemon.imagent(["status", "--json"])
        last = result.stdout
        if let status = try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any],
           let link = status["link"] as? [String: Any], let matched = match(link) {
            return matched
        }
        try await Task.sleep(for: .milliseconds(100))
    }
    throw RealDaemonError("the status never matched; last: \(last)\ndaemon log:\n\(daemon.log.suffix(3000))")
}
