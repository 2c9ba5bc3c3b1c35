import Foundation
import IMAgentTestKit
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The real `imagentd` against ejabberd 23.01's `mod_mqtt` (issue 30), the second broker: it
/// answers a wrong password with CONNACK 0x87, ignores the client's Maximum Packet Size, and
/// grants a session expiry of 300 s whatever CONNECT asks. Skipped, with the reason, where
/// ejabberd is not installed.
@Suite(.serialized, .timeLimit(.minutes(3)), .enabled(if: TCPEjabberd.missing == nil, "\(TCPEjabberd.missing ?? "")"))
struct EjabberdUpstreamTests {
    @Test func tokenRotatedOnTheBroker_linkBackWithinTheCapOfTheNewToken_downMessagesKept() async throws {
        try await withEjabberdDaemon { daemon, broker in
            _ = try await daemon.waitForLink("connected")
            let session = try await openEcho(daemon)
            try broker.setPassword("rotated-token")
            MQTTTokenRotationTests.cutLinks(to: broker.port)
            let refused = try await waitForStatus(daemon, within: .seconds(20)) { link in
                (link["last_error"] as? String)?.contains("0x87") == true ? link : nil
            }
            #expect((refused["last_error"] as? String)?.contains("check that the [auth] token") == true, "\(refused)")
            // Published while the daemon is refused: ejabberd keeps its session (and subscription) meanwhile.
            try publishDown(port: broker.port, [("imagent/mqtt-test-host/echo/\(session)/down", 1, 10)], directory: broker.directory)
            try await Task.sleep(for: .seconds(2))
            let stillRefused = try await daemon.imagent(["status", "--json"])
            #expect(!stillRefused.stdout.contains("\"stopped\""), "a refused login never stops the link: \(stillRefused.stdout)")

            try "rotated-token\n".write(toFile: daemon.directory + "/token", atomically: true, encoding: .utf8)
            let appeared = ContinuousClock.now
            _ = try await daemon.waitForLink("connected", within: .seconds(10))
            let back = ContinuousClock.now - appeared
            #expect(back < .seconds(3), "the link came back \(back) after the new token appeared (cap 1 s)")
            #expect(try await listenSeqs(daemon, session, count: 1, after: 0, timeout: 15) == [1])
            print("ejabberd token rotation: link back \(back) after the token file changed")
        }
    }

    @Test func aDownMessageAboveMaxFrame_isRefused_theLinkStays_andAnotherSessionsMessageArrives() async throws {
        try await withEjabberdDaemon(maxFrame: 1_024) { daemon, broker in
            let connected = try await daemon.waitForLink("connected")
            let reconnectsBefore = ((connected["link"] as? [String: Any])?["reconnects"] as? NSNumber)?.intValue ?? -1
            let big = try await openEcho(daemon)
            let other = try await openEcho(daemon)
            let sent = ContinuousClock.now
            try publishDown(port: broker.port, [("imagent/mqtt-test-host/echo/\(big)/down", 1, 3_000),
                                                ("imagent/mqtt-test-host/echo/\(other)/down", 1, 10)], directory: broker.directory)
            #expect(try await listenSeqs(daemon, other, count: 1, after: 0, timeout: 10) == [1])
            let latency = ContinuousClock.now - sent
            #expect(latency < .seconds(3), "the other session's message took \(latency)")
            try await Task.sleep(for: .seconds(2))
            let status = try await daemon.waitForLink("connected")
            let reconnects = ((status["link"] as? [String: Any])?["reconnects"] as? NSNumber)?.intValue ?? -1
            #expect(reconnects == reconnectsBefore, "the link stayed up (reconnects \(reconnectsBefore) → \(reconnects))")
            let line = daemon.log.split(separator: "\n").first { $0.contains("refusing a PUBLISH above the Maximum Packet Size") } ?? ""
            #expect(line.contains("\(big)") && line.contains("seq"), "the oversized message's fate is logged, with its session:\n\(daemon.log.suffix(2000))")
            print("ejabberd oversized message: other session's message after \(latency), reconnects \(reconnectsBefore) → \(reconnects)")
        }
    }

    /// Echoes through ejabberd, each once and in order at the local program, across a `kill -9` of
    /// the daemon with messages in its outbox and a restart of ejabberd (which forgets its sessions:
    /// the daemon and the backend subscribe again).
    @Test func echoes_exactlyOnce_acrossKillNine_andABrokerRestart() async throws {
        let total = 1_000
        try await withEjabberdDaemon { daemon, broker in
            let echo = try startEjabberdEcho(port: broker.port, directory: broker.directory)
            defer {
                echo.terminate()
                echo.waitUntilExit()
            }
            _ = try await daemon.waitForLink("connected")
            let session = try await openEcho(daemon)
            let started = ContinuousClock.now
            // 1. Half accepted, then kill -9 at once: most are still in the outbox.
            try await sendLines(daemon, session, 1...total / 2)
            daemon.signal(SIGKILL)
            _ = await daemon.waitForExit(within: .seconds(5))
            daemon = try await daemon.restarted()
            var seqs = try await listenSeqs(daemon, session, count: total / 2, after: 0, timeout: 60)
            // 2. ejabberd restarts; its sessions are gone, so both sides subscribe again.
            try broker.restart()
            _ = try await daemon.waitForLink("connected", within: .seconds(20))
            try await sendLines(daemon, session, total / 2 + 1...total)
            seqs += try await listenSeqs(daemon, session, count: total - total / 2, after: seqs.last ?? 0, timeout: 60)
            #expect(seqs == (1...UInt64(total)).map { $0 }, "\(seqs.count) received\n\(daemon.log.suffix(3000))")
            print("ejabberd exactly-once: \(total) echoes, \(seqs.count) received in order, across kill -9 and a broker restart, in \(ContinuousClock.now - started)")
        }
    }

    @Test func status_showsWhatEjabberdGranted_andTheShortSessionExpiryIsWarned() async throws {
        try await withEjabberdDaemon { daemon, _ in
            let status = try await daemon.waitForLink("connected")
            let granted = try #require((status["link"] as? [String: Any])?["mqtt_broker"] as? [String: Any], "\(status)")
            #expect(granted["session_expiry_s"] as? Int == 300 && granted["session_expiry_requested_s"] as? Int == 3_600, "\(granted)")
            #expect(granted["shared_subscription_available"] as? Bool == false, "\(granted)")
            #expect(granted["warnings"] as? Int == 1)
            #expect(daemon.log.contains("session expiry of 300 s, less than the 3600 s"), "\(daemon.log.suffix(2000))")
            let human = try await daemon.imagent(["status"])
            let line = human.stdout.split(separator: "\n").first { $0.hasPrefix("session expiry:") } ?? ""
            #expect(line.hasSuffix("300 s granted (3600 s requested): an outage longer than that loses down messages at the broker"),
                    "plain `imagent status` says it too: \(human.stdout)")
            #expect(human.stdout.contains("shared subscriptions no"), "\(human.stdout)")
        }
    }
}
