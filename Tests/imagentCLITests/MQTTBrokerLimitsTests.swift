import Foundation
import IMAgentTestKit
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// What a broker, or anyone who can publish to the host's topics, can make the real `imagentd` do
/// over MQTT (issue 27): against Debian's mosquitto 2 and the echo backend, with a paho-mqtt
/// publisher standing in for a backend that does not stop.
@Suite(.serialized, .timeLimit(.minutes(4)))
struct MQTTBrokerLimitsTests {
    /// `[limits] inbox_messages` holds over MQTT: a session nobody reads takes that many messages
    /// and no more (the rest are refused with PUBACK 0x97 and logged), and another session's
    /// messages still come, without a reconnect.
    @Test func aFullInbox_takesNoMore_andTheOtherSessionsGoOn() async throws {
        try await withMQTTDaemon(daemonExtra: "[limits]\ninbox_messages = 50\n") { daemon, broker, _ in
            _ = try await daemon.waitForLink("connected")
            let full = try await openSession(daemon, "echo")
            let other = try await openSession(daemon, "echo")
            try publishDown(port: broker.port, session: full, seqs: 1...300, directory: daemon.directory)
            let inbox = try await waitForInbox(daemon, full, atLeast: 50)
            // Whatever is still on its way has had time to be stored.
            try await Task.sleep(for: .seconds(1))
            let settled = try await sessionRow(daemon, full)["inbox"] as? Int
            #expect(inbox == 50 && settled == 50, "the inbox stops at inbox_messages: \(String(describing: inbox)) then \(String(describing: settled))")
            #expect(daemon.log.contains("refusing a PUBLISH (PUBACK 0x97"), "\(daemon.log.suffix(2000))")

            try publishDown(port: broker.port, session: other, seqs: 1...20, directory: daemon.directory)
            let received = try await listenCount(daemon, other, count: 20)
            #expect(received == 20, "the other session's messages come while one inbox is full")
            #expect(try await reconnects(daemon) == 0)
        }
    }

    /// mosquitto 2.0 sends the messages it queued while the host was away all at once after the
    /// reconnect, far beyond our Receive Maximum [MQTT-3.3.4-9]: the daemon takes them (reading at
    /// its own pace) instead of dropping the link at "more than 1024 unacknowledged".
    @Test func aBrokerAboveOurReceiveMaximum_afterAnOutage_isTaken_withoutDroppingTheLink() async throws {
        try await withMQTTDaemon { daemon, broker, _ in
            _ = try await daemon.waitForLink("connected")
            let session = try await openSession(daemon, "echo")
            daemon.signal(SIGTERM)
            #expect(await daemon.waitForExit(within: .seconds(10)) != nil, "imagentd did not stop on SIGTERM")
            try publishDown(port: broker.port, session: session, seqs: 1...3_000, directory: daemon.directory)

            daemon = try await daemon.restarted()
            _ = try await daemon.waitForLink("connected")
            let received = try await listenCount(daemon, session, count: 3_000, timeout: 90)
            #expect(received == 3_000)
            #expect(try await reconnects(daemon) == 0, "\(daemon.log.suffix(3000))")
            #expect(!daemon.log.contains("unacknowledged QoS 1 messages\""), "\(daemon.log.suffix(2000))")
            #expect(daemon.log.contains("Receive Maximum"), "the broker's excess is logged: \(daemon.log.suffix(2000))")
        }
    }

    /// The broker refuses a session's `up` message (an ACL denies its topic: PUBACK 0x87): that
    /// session fails with UPSTREAM_REJECTED, as after an IMLink server's OPEN_FAIL FORBIDDEN, and
    /// the link and the other sessions go on.
    ///
    /// The broker runs with a bound on queued messages: with `max_queued_messages 0` (no bound, the
    /// suite's default), mosquitto 2.0.11 closes any client right after the PUBACK 0x87 of a denied
    /// QoS 1 PUBLISH ("Bad socket read/write … Unknown error" in its log); paho-mqtt is closed the
    /// same way, with or without a Topic Alias, so that reconnect is the broker's, not imagentd's.
    @Test func anUpMessageTheBrokerRefuses_failsItsSessionAlone() async throws {
        let acl: (String) throws -> String = { directory in
            try """
                topic readwrite #
                topic deny imagent/mqtt-test-host/denied/+/up
                """.write(toFile: directory + "/acl", atomically: true, encoding: .utf8)
            return "acl_file \(directory)/acl\nmax_queued_messages 1000"
        }
        try await withMQTTDaemon(brokerFiles: acl) { daemon, _, _ in
            _ = try await daemon.waitForLink("connected")
            let denied = try await openSession(daemon, "denied")
            let echo = try await openSession(daemon, "echo")
            #expect(try await daemon.imagent(["send", "\(denied)", "x"]).status == 0)
            let failed = try await poll(within: .seconds(10), every: .milliseconds(100)) { () -> [String: Any]? in
                let row = try await sessionRow(daemon, denied)
                return row["state"] as? String == "failed" ? row : nil
            }
            let reason = failed?["reason"] as? String ?? ""
            #expect(reason.contains("0x87") && reason.contains("notAuthorized"), "\(String(describing: failed))\n\(daemon.log.suffix(2000))")
            let status = try JSONSerialization.jsonObject(with: Data(try await daemon.imagent(["status", "--json"]).stdout.utf8)) as? [String: Any]
            let sessions = status?["sessions"] as? [String: Any]
            #expect(sessions?["refused_total"] as? Int == 1 && sessions?["failed"] as? Int == 1, "STATUS counts the refusal: \(String(describing: sessions))")
            let again = try await daemon.imagent(["send", "\(denied)", "y"])
            #expect(again.status == 4 && again.stderr.contains("UPSTREAM_REJECTED"), "\(again.stderr)")

            #expect(try await daemon.imagent(["send", "\(echo)", "hello"]).status == 0)
            #expect(try await listenCount(daemon, echo, count: 1) == 1, "the echo session goes on")
            #expect(try await reconnects(daemon) == 0, "\(daemon.log.suffix(3000))")
        }
    }

    /// A message the broker drops the connection on, every time: mosquitto answers one above its
    /// `message_size_limit` (which CONNACK does not announce) with PUBACK 0x95, a code MQTT 5 does
    /// not allow in PUBACK, so imagentd ends the connection as for any protocol error, and the
    /// message goes again on the next one. After three such losses its session is quarantined
    /// (imagentd(8), QUARANTINE); the other session goes on, at the cost of those reconnects.
    @Test func anUpMessageThatEndsTheConnectionEveryTime_isQuarantined_theOthersGoOn() async throws {
        try await withMQTTDaemon(brokerExtra: "message_size_limit 1000") { daemon, _, _ in
            _ = try await daemon.waitForLink("connected")
            let big = try await openSession(daemon, "big")
            let echo = try await openSession(daemon, "echo")
            #expect(try await daemon.imagent(["send", "\(big)", String(repeating: "x", count: 2_000)]).status == 0)
            let failed = try await poll(within: .seconds(20), every: .milliseconds(100)) { () -> [String: Any]? in
                let row = try await sessionRow(daemon, big)
                return row["state"] as? String == "failed" ? row : nil
            }
            let reason = failed?["reason"] as? String ?? ""
            #expect(reason.hasPrefix("quarantined: the link was lost 3 times just after seq 1"),
                    "\(String(describing: failed))\n\(daemon.log.suffix(2000))")
            #expect(daemon.log.contains("session \(big) of uid \(getuid()) quarantined"), "\(daemon.log.suffix(2000))")
            #expect(try await daemon.imagent(["send", "\(echo)", "hello"]).status == 0)
            #expect(try await listenCount(daemon, echo, count: 1) == 1, "the echo session goes on")
            #expect(try await reconnects(daemon) <= 3, "\(daemon.log.suffix(3000))")
        }
    }

    // MARK: Helpers

    private func openSession(_ daemon: RealDaemon, _ service: String) async throws -> UInt64 {
        let opened = try await daemon.imagent(["open", service, "--json"])
        return try #require(((try JSONSerialization.jsonObject(with: Data(opened.stdout.utf8)) as? [String: Any])?["session"] as? NSNumber)?.uint64Value,
                            "open: \(opened.stdout) \(opened.stderr)")
    }

    private func sessionRow(_ daemon: RealDaemon, _ session: UInt64) async throws -> [String: Any] {
        let json = try await daemon.imagent(["sessions", "--json"])
        let rows = try #require((try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])?["sessions"]
            as? [[String: Any]], "\(json.stdout) \(json.stderr)")
        return try #require(rows.first { ($0["session"] as? NSNumber)?.uint64Value == session }, "\(rows)")
    }

    private func waitForInbox(_ daemon: RealDaemon, _ session: UInt64, atLeast count: Int) async throws -> Int? {
        try await poll(within: .seconds(30), every: .milliseconds(100)) { () -> Int? in
            let inbox = try await sessionRow(daemon, session)["inbox"] as? Int ?? 0
            return inbox >= count ? inbox : nil
        }
    }

    private func listenCount(_ daemon: RealDaemon, _ session: UInt64, count: Int, timeout: Int = 20) async throws -> Int {
        let result = try await ImagentProcess.run(["--socket", daemon.socketPath, "--timeout", "\(timeout)", "listen", "\(session)",
                                                   "--count", "\(count)", "--json"], limit: .seconds(timeout + 15))
        #expect(result.status == 0, "\(result.stderr)\n\(daemon.log.suffix(2000))")
        return result.stdoutLines.count
    }

    private func reconnects(_ daemon: RealDaemon) async throws -> Int {
        let status = try await daemon.waitForLink("connected")
        let link = try #require(status["link"] as? [String: Any], "no link in \(status)")
        return try #require((link["reconnects"] as? NSNumber)?.intValue, "no reconnects in \(status)")
    }

    /// Publishes `m<seq>` with `imagent-seq` on the session's `down` topic, QoS 1, as fast as the
    /// broker takes them (paho-mqtt, from scripts/bootstrap), and waits until the broker has them all.
    private func publishDown(port: UInt16, session: UInt64, seqs: ClosedRange<Int>, directory: String) throws {
        let script = directory + "/publish-down.py"
        try """
            import sys
            import paho.mqtt.client as mqtt
            from paho.mqtt.properties import Properties
            from paho.mqtt.packettypes import PacketTypes
            port, topic, first, last = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
            client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="publisher", protocol=mqtt.MQTTv5)
            client.max_inflight_messages_set(1000)
            client.max_queued_messages_set(0)
            client.connect("127.0.0.1", port)
            client.loop_start()
            infos = []
            for seq in range(first, last + 1):
                properties = Properties(PacketTypes.PUBLISH)
                properties.UserProperty = ("imagent-seq", str(seq))
                infos.append(client.publish(topic, b"m%d" % seq, qos=1, properties=properties))
            for info in infos:
                info.wait_for_publish(30)
            client.loop_stop()
            client.disconnect()
            """.write(toFile: script, atomically: true, encoding: .utf8)
        let process = try ChildProcess(executable: "/usr/bin/timeout",
                                       arguments: ["60", "python3", script, "\(port)", "imagent/mqtt-test-host/echo/\(session)/down",
                                                   "\(seqs.lowerBound)", "\(seqs.upperBound)"],
                                       stdout: .file(directory + "/publisher.log", append: true),
                                       stderr: .file(directory + "/publisher.log", append: true))
        process.waitUntilExit()
        let log = (try? String(contentsOfFile: directory + "/publisher.log", encoding: .utf8)) ?? ""
        #expect(process.terminationStatus == 0, "the publisher failed: \(log)")
    }
}
