import Foundation
import Testing

/// The commands scripts and operators lean on, against the real `imagentd`:
/// `wait-online`, `open -q`.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct OperatorCommandTests {
    @Test func waitOnline_returnsAtOnceWhenUp_andWaitsForAConnect() async throws {
        try await withRealDaemon { daemon in
            _ = try await daemon.waitForLink("connected")
            let up = try await daemon.imagent(["wait-online", "--timeout", "10"])
            #expect(up.status == 0, "\(up.stderr)")
            #expect(up.stdout == "imagentd is online: connected to \(daemon.server.address)\n")

            #expect(try await daemon.imagent(["disconnect"]).status == 0)
            _ = try await daemon.waitForLink("stopped")
            let clock = ContinuousClock()
            let started = clock.now
            async let waited = daemon.imagent(["wait-online", "--timeout", "15", "--json"])
            try await Task.sleep(for: .milliseconds(800))
            #expect(try await daemon.imagent(["connect"]).status == 0)
            let result = try await waited
            #expect(result.status == 0, "\(result.stderr)")
            #expect(clock.now - started >= .milliseconds(800), "wait-online returned before the link was up")
            let link = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
            #expect(link?["state"] as? String == "connected")
        }
    }

    @Test func waitOnline_timesOutWith5_andSaysWhereTheLinkIs() async throws {
        try await withRealDaemon { daemon in
            _ = try await daemon.waitForLink("connected")
            #expect(try await daemon.imagent(["disconnect"]).status == 0)
            _ = try await daemon.waitForLink("stopped")
            let clock = ContinuousClock()
            let started = clock.now
            let result = try await daemon.imagent(["wait-online", "--timeout", "1"])
            #expect(result.status == 5)
            #expect(clock.now - started >= .seconds(1))
            #expect(result.stderr.hasPrefix("imagent: the link did not come up within 1 s; it is "), "\(result.stderr)")
        }
    }

    @Test func waitOnline_withoutADaemon_exits2AfterTheTimeout() async throws {
        let directory = try FakeDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let result = try await ImagentProcess.run(["--socket", directory + "/absent.sock", "wait-online", "--timeout", "0.5"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("imagentd is not running"), "\(result.stderr)")
    }

    @Test func openQuiet_printsOnlyTheSessionId() async throws {
        try await withRealDaemon { daemon in
            _ = try await daemon.waitForLink("connected")
            let opened = try await daemon.imagent(["open", "-q", "echo"])
            #expect(opened.status == 0, "\(opened.stderr)")
            let id = try #require(UInt64(opened.stdout.dropLast()))
            #expect(opened.stdout == "\(id)\n")
            let sent = try await daemon.imagent(["send", "\(id)", "hi"])
            #expect(sent.status == 0, "\(sent.stderr)")
            let both = try await daemon.imagent(["open", "-q", "--json", "echo"])
            #expect(both.status == 1)
        }
    }

    @Test func events_showWhatHappenedBefore_andSinceFiltersByTime() async throws {
        try await withRealDaemon { daemon in
            _ = try await daemon.waitForLink("connected")
            let opened = try await daemon.imagent(["open", "-q", "echo"])
            #expect(opened.status == 0, "\(opened.stderr)")
            #expect(try await daemon.imagent(["disconnect"]).status == 0)
            _ = try await daemon.waitForLink("stopped")
            #expect(try await daemon.imagent(["connect"]).status == 0)
            _ = try await daemon.waitForLink("connected")

            let json = try await daemon.imagent(["events", "--json"])
            #expect(json.status == 0, "\(json.stderr)")
            let events = json.stdoutLines.compactMap { line in
                try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            }
            #expect(events.count == json.stdoutLines.count)
            let states = events.filter { $0["event"] as? String == "link" }.compactMap { $0["state"] as? String }
            #expect(states.first == "connecting", "\(states)")
            // The disconnect, then the connect's stages, then the link up again.
            let stopped = try #require(states.lastIndex(of: "stopped"), "\(states)")
            #expect(states[stopped...].contains("connecting") && states.last == "connected", "\(states)")
            #expect(events.contains { $0["event"] as? String == "session" && $0["change"] as? String == "opened" })

            let human = try await daemon.imagent(["events", "--since", "10m"])
            #expect(human.stdoutLines.count == events.count)
            #expect(human.stdout.contains("  link  state=stopped"), "\(human.stdout)")
            try await Task.sleep(for: .milliseconds(1100))
            let none = try await daemon.imagent(["events", "--since", "1s"])
            #expect(none.status == 0)
            #expect(none.stdout.isEmpty, "\(none.stdout)")
            let bad = try await daemon.imagent(["events", "--since", "soon"])
            #expect(bad.status == 1)
        }
    }

    @Test func doctor_passesOnAHealthyLink_andSaysWhatToDoOtherwise() async throws {
        try await withRealDaemon { daemon in
            _ = try await daemon.waitForLink("connected")
            let healthy = try await daemon.imagent(["doctor"])
            #expect(healthy.status == 0, "\(healthy.stdout)\(healthy.stderr)")
            let port = daemon.server.address.split(separator: ":").last.map(String.init) ?? ""
            #expect(healthy.stdoutLines == [
                "ok    socket: \(daemon.socketPath) accepts this user",
                "ok    daemon: imagentd 0.1.0 answers",
                "ok    configuration: endpoints and a token are set",
                "ok    link: connected to \(daemon.server.address)",
                "ok    clock: within 0 s of the server's",
                "ok    dns 127.0.0.1: 127.0.0.1",
                "ok    tcp 127.0.0.1 port \(port): reachable",
            ])

            // The server gone: the link and the TCP check fail, each with what to do.
            try await daemon.server.stop()
            _ = try await daemon.waitForLink("waiting")
            let broken = try await daemon.imagent(["doctor"])
            #expect(broken.status == 4)
            // Between its retries the link waits ("reconnecting in …") or tries ("connecting to …"):
            // the retry that doctor meets depends on the backoff's draw.
            #expect(broken.stdout.contains("FAIL  link: reconnecting in ") || broken.stdout.contains("FAIL  link: connecting to "),
                    "\(broken.stdout)")
            #expect(broken.stdout.contains("FAIL  tcp 127.0.0.1 port \(port): Connection refused; check the server"), "\(broken.stdout)")
            #expect(broken.stderr == "imagent: 2 of 7 checks failed\n")
        }
        let directory = try FakeDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let absent = try await ImagentProcess.run(["--socket", directory + "/absent.sock", "doctor"])
        #expect(absent.status == 2)
        #expect(absent.stdout.hasPrefix("FAIL  socket: imagentd is not running"), "\(absent.stdout)")
    }
}
