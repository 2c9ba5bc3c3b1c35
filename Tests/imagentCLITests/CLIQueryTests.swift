import AgentIPC
import Foundation
import Testing

/// `imagent status|sessions|metrics|watch|ping` as a child process against
/// the fake daemon: human output, `--json`, exit status 0.
@Suite struct CLIQueryTests {
    @Test func status_showsEveryField_forPeople() async throws {
        try await withFakeDaemon { daemon in
            let result = try await ImagentProcess.run(["status"], against: daemon)
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdoutLines == [
                "link:        connected",
                "server:      127.0.0.1:7000",
                "connected:   since 2023-11-14 22:13:20 UTC, up 1h 2m 3s",
                "rtt:         12.5 ms",
                "heartbeat:   every 30 s",
                "reconnects:  2",
                "last error:  -",
                "link.flaps:  1",
                "daemon:      imagentd 0.9.0-fake, pid 4242, up 1d 1h 1m",
                "sessions:    3",
                "outbox:      4 messages waiting for the server",
                "inbox:       5 messages waiting for clients",
            ])
        }
    }

    @Test func status_withFieldsMissing_showsDashes() async throws {
        var script = FakeDaemon.Script()
        script.status = #"{"link":{"state":"connecting","detail":"resolving"}}"#
        try await withFakeDaemon(script) { daemon in
            let result = try await ImagentProcess.run(["status"], against: daemon)
            #expect(result.status == 0)
            #expect(result.stdoutLines.contains("link:        connecting (resolving)"))
            #expect(result.stdoutLines.contains("server:      -"))
            #expect(result.stdoutLines.contains("daemon:      imagentd -, pid -, up -"))
        }
    }

    @Test func status_json_isTheDaemonsDocument_withTheFixedCommandLine() async throws {
        try await withFakeDaemon { daemon in
            // design.md fixes this spelling: `imagent --socket PATH status --json`.
            let result = try await ImagentProcess.run(["--socket", daemon.socketPath, "status", "--json"])
            #expect(result.status == 0)
            #expect(try jsonObject(result.stdout) == jsonObject(FakeDaemon.statusJSON))
            #expect(result.stdoutLines.count == 1)
        }
    }

    @Test func theSocketComesFromIMAGENT_SOCKET_whenNotGiven() async throws {
        try await withFakeDaemon { daemon in
            let result = try await ImagentProcess.run(["status", "--json"],
                                                      environment: ["IMAGENT_SOCKET": daemon.socketPath])
            #expect(result.status == 0, "\(result.stderr)")
            #expect(daemon.received(.status).count == 1)
        }
    }

    @Test func sessions_isATable_withPriorityNames_andUnknownFieldsLast() async throws {
        try await withFakeDaemon { daemon in
            let result = try await ImagentProcess.run(["sessions"], against: daemon)
            #expect(result.status == 0)
            #expect(result.stdoutLines == [
                "SESSION  SERVICE  STATE   PRIORITY  ATTACHED  SENT  ACKED  DELIVERED  RECEIVED  OUTBOX  INBOX  OTHER",
                "7        echo     open    high      yes       10    9      3          4         1       1      owner_uid=1000",
                "8        push     paused  low       no        0     0      0          0         0       0      -",
            ])
            let json = try await ImagentProcess.run(["sessions", "--json"], against: daemon)
            #expect(try jsonObject(json.stdout) == jsonObject(FakeDaemon.sessionsJSON))
        }
    }

    @Test func sessions_none() async throws {
        var script = FakeDaemon.Script()
        script.sessions = #"{"sessions":[]}"#
        try await withFakeDaemon(script) { daemon in
            let result = try await ImagentProcess.run(["sessions"], against: daemon)
            #expect(result.stdoutLines == ["no sessions"])
        }
    }

    @Test func metrics_forPeople_json_andPrometheus() async throws {
        try await withFakeDaemon { daemon in
            let human = try await ImagentProcess.run(["metrics"], against: daemon)
            #expect(human.status == 0)
            #expect(human.stdoutLines == [
                "counters:",
                "  connect_attempts     3",
                "  messages_sent_total  1200",
                "  frames.in            77",
                "gauges:",
                "  sessions              2",
                "  heartbeat_interval_s  30",
                "  rtt_ms.p50            11.5",
                "  rtt_ms.p99            40",
                "  link_up               yes",
                "uptime_s: 5",
            ])

            let prometheus = try await ImagentProcess.run(["metrics", "--prometheus"], against: daemon)
            #expect(prometheus.status == 0)
            #expect(prometheus.stdoutLines == [
                "# TYPE imagent_connect_attempts_total counter", "imagent_connect_attempts_total 3",
                "# TYPE imagent_messages_sent_total counter", "imagent_messages_sent_total 1200",
                "# TYPE imagent_frames_in_total counter", "imagent_frames_in_total 77",
                "# TYPE imagent_sessions gauge", "imagent_sessions 2",
                "# TYPE imagent_heartbeat_interval_s gauge", "imagent_heartbeat_interval_s 30",
                "# TYPE imagent_rtt_ms_p50 gauge", "imagent_rtt_ms_p50 11.5",
                "# TYPE imagent_rtt_ms_p99 gauge", "imagent_rtt_ms_p99 40",
                "# TYPE imagent_link_up gauge", "imagent_link_up 1",
            ])

            let json = try await ImagentProcess.run(["metrics", "--json"], against: daemon)
            #expect(try jsonObject(json.stdout) == jsonObject(FakeDaemon.metricsJSON))

            let both = try await ImagentProcess.run(["metrics", "--json", "--prometheus"], against: daemon)
            #expect(both.status == 1)
            #expect(both.stderr.contains("choose one"))
        }
    }

    @Test func watch_printsOneLinePerEvent() async throws {
        try await withFakeDaemon { daemon in
            let result = try await ImagentProcess.run(["watch", "--count", "2"], against: daemon)
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdoutLines == [
                "22:13:21.234  link_state  state=connected  endpoint=127.0.0.1:7000",
                #"22:13:22.000  heartbeat  rtt_ms=11  note="two words""#,
            ])
            let json = try await ImagentProcess.run(["watch", "--count", "2", "--json"], against: daemon)
            #expect(json.stdoutLines.count == 2)
            #expect(try json.stdoutLines.map(jsonObject) == FakeDaemon.watchEventsJSON.map(jsonObject))
        }
    }

    @Test func ping_printsTheRoundTripTime() async throws {
        try await withFakeDaemon { daemon in
            let human = try await ImagentProcess.run(["ping", "--count", "2"], against: daemon)
            #expect(human.status == 0)
            #expect(human.stdoutLines.count == 2)
            #expect(human.stdoutLines.allSatisfy {
                $0.hasPrefix("pong from imagentd 0.9.0-fake at \(daemon.socketPath): seq=") && $0.hasSuffix(" ms")
            })
            let clock = ContinuousClock()
            let started = clock.now
            let json = try await ImagentProcess.run(["ping", "--json"], against: daemon)
            let wall = clock.now - started
            let object = try #require(try jsonObject(json.stdout) as? [String: Any])
            // A real round trip over the socket: some microseconds, within the command's own run.
            let rtt = try #require(object["rtt_ms"] as? Double, "\(object)")
            #expect(rtt > 0 && rtt <= Double(wall.components.seconds) * 1e3 + Double(wall.components.attoseconds) / 1e15,
                    "\(rtt) ms in a command that took \(wall)")
            #expect(object["daemon_version"] as? String == "0.9.0-fake")
        }
    }
}

/// Parses JSON with Foundation, independently of the CLI's own parser, and
/// returns it as an NSObject so that documents compare by value.
func jsonObject(_ text: String) throws -> NSObject {
    try #require(JSONSerialization.jsonObject(with: Data(text.utf8)) as? NSObject)
}
