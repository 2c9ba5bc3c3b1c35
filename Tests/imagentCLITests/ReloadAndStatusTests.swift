import Foundation
import Testing

/// Day-one operation of the real `imagentd`: starting unconfigured, a reload
/// that applies (limits at once, link settings through one reconnect), a
/// status that reads like a sentence, and `--check-config` exiting 78.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct ReloadAndStatusTests {
    /// The test configuration without its `[server]` table: nowhere to connect.
    static func withoutEndpoints(_ text: String) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false)
            .filter { !$0.hasPrefix("endpoints = ") }
            .joined(separator: "\n")
    }

    @Test func unconfigured_servesItsSocket_saysWhatToDo_andConnectsAfterAReload() async throws {
        let setup = try await RealDaemon.prepare()
        let full = try String(contentsOfFile: setup.configPath, encoding: .utf8)
        try Self.withoutEndpoints(full).write(toFile: setup.configPath, atomically: true, encoding: .utf8)
        let daemon = try await RealDaemon.launch(setup)
        defer { Task { await daemon.stop() } }

        let status = try await daemon.waitForLink("unconfigured", within: .seconds(5))
        let link = try #require(status["link"] as? [String: Any])
        #expect((link["detail"] as? String)?.hasPrefix("unconfigured: no endpoints: set [server] endpoints") == true, "\(link)")
        #expect((link["next_step"] as? String)?.contains("`imagent reload`") == true)
        let human = try await daemon.imagent(["status"])
        #expect(human.stdoutLines.first?.hasPrefix("link:        unconfigured: no endpoints") == true, "\(human.stdout)")
        #expect(human.stdout.contains("next:        set [server] endpoints"))
        // Sessions can be opened while unconfigured; their messages wait for the link.
        let opened = try await daemon.imagent(["open", "-q", "echo"])
        #expect(opened.status == 0, "\(opened.stderr)")
        let session = opened.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try await daemon.imagent(["send", session, "queued"]).status == 0)

        try full.write(toFile: setup.configPath, atomically: true, encoding: .utf8)
        let reload = try await daemon.imagent(["reload"])
        #expect(reload.status == 0, "\(reload.stderr)")
        #expect(reload.stdoutLines.contains("applied by reconnecting the link: server.endpoints"), "\(reload.stdout)")
        _ = try await daemon.waitForLink("connected")
        let heard = try await daemon.imagent(["listen", session, "--count", "1"])
        #expect(heard.stdout == "#1 queued\n", "\(heard.stderr)")
        #expect(daemon.process.isRunning)
        await daemon.stop()
    }

    @Test func reload_appliesLimitsForReal_andLinkSettingsThroughOneReconnect() async throws {
        try await withRealDaemon { daemon in
            _ = try await daemon.waitForLink("connected")
            let opened = try await daemon.imagent(["open", "-q", "sink"])
            let session = opened.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(try await daemon.imagent(["disconnect"]).status == 0)
            _ = try await daemon.waitForLink("stopped")

            let original = try String(contentsOfFile: daemon.configPath, encoding: .utf8)
            try (original + "[limits]\noutbox_messages = 2\n").write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
            let reload = try await daemon.imagent(["reload", "--json"])
            #expect(reload.status == 0, "\(reload.stderr)")
            let report = try JSONSerialization.jsonObject(with: Data(reload.stdout.utf8)) as? [String: Any]
            #expect(report?["applied"] as? [String] == ["limits.outbox_messages"])
            #expect(report?["needs_restart"] as? [String] == [])
            // A link taken down by an administrator stays down through a reload that moves it.
            let text = try String(contentsOfFile: daemon.configPath, encoding: .utf8)
            try text.replacingOccurrences(of: "min_seconds = 1", with: "min_seconds = 2")
                .write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
            #expect(try await daemon.imagent(["reload"]).stdoutLines.contains("applied by reconnecting the link: heartbeat"))
            try await Task.sleep(for: .milliseconds(500))
            _ = try await daemon.waitForLink("stopped", within: .seconds(2))
            try text.write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
            #expect(try await daemon.imagent(["reload"]).status == 0)
            #expect(try await daemon.imagent(["send", session, "one"]).status == 0)
            #expect(try await daemon.imagent(["send", session, "two"]).status == 0)
            let full = try await daemon.imagent(["send", session, "three"])
            #expect(full.status == 4)
            #expect(full.stderr.contains("QUEUE_FULL"), "\(full.stderr)")
            #expect(try await daemon.imagent(["connect"]).status == 0)
            _ = try await daemon.waitForLink("connected")

            // A heartbeat change goes through one reconnect; an [ipc] change waits for a restart.
            let heartbeat = original.replacingOccurrences(of: "max_seconds = 2", with: "max_seconds = 3")
                .replacingOccurrences(of: "mode = \"0600\"", with: "mode = \"0660\"")
            try heartbeat.write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
            let second = try await daemon.imagent(["reload"])
            #expect(second.status == 0, "\(second.stderr)")
            #expect(second.stdoutLines == [
                "imagentd re-read its configuration",
                "applied: limits.outbox_messages",
                "applied by reconnecting the link: heartbeat",
                "needs a restart (systemctl restart imagentd): ipc",
            ])
            _ = try await daemon.waitForLink("connected")
            // The two messages queued before reach the server on the new link.
            var listed = ""
            for _ in 0..<50 {
                listed = try await daemon.imagent(["sessions", "--json"]).stdout
                if listed.contains("\"acked_seq\":2") { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(listed.contains("\"acked_seq\":2"), "\(listed)")
        }
    }

    @Test func backingOff_readsAsASentence_withTheLastErrorAndItsTime() async throws {
        // A port nobody listens on: every attempt is refused.
        let setup = try await RealDaemon.prepare()
        let text = try String(contentsOfFile: setup.configPath, encoding: .utf8)
            .replacingOccurrences(of: setup.server.address, with: "127.0.0.1:1")
            .replacingOccurrences(of: "base_ms = 100", with: "base_ms = 3000")
            .replacingOccurrences(of: "cap_ms = 1000", with: "cap_ms = 5000")
        try text.write(toFile: setup.configPath, atomically: true, encoding: .utf8)
        let daemon = try await RealDaemon.launch(setup)
        defer { Task { await daemon.stop() } }
        let status = try await daemon.waitForLink("waiting", within: .seconds(10))
        let link = try #require(status["link"] as? [String: Any])
        let detail = try #require(link["detail"] as? String)
        #expect(detail.range(of: #"^reconnecting in [0-9]+ s \(connection refused\)$"#, options: .regularExpression) != nil, "\(detail)")
        #expect(link["last_error"] as? String == "connection refused")
        #expect((link["last_error_ms"] as? Int).map { abs($0 - Int(Date().timeIntervalSince1970 * 1000)) < 30_000 } == true)
        let human = try await daemon.imagent(["status"])
        #expect(human.stdout.contains("link:        reconnecting in "), "\(human.stdout)")
        #expect(human.stdout.contains("last error:  connection refused (at 20"), "\(human.stdout)")
        #expect(human.stdout.contains("store:       \(setup.directory)/imagentd.sqlite3, "), "\(human.stdout)")
        #expect(!human.stdout.contains("{"), "no raw JSON for people: \(human.stdout)")
        await daemon.stop()
    }

    @Test func checkConfig_exits78_onEveryProblemItNames() async throws {
        let directory = try FakeDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/imagentd.toml"
        try """
            [server]
            endpoints = ["127.0.0.1:7443"]
            [server.tls]
            ca_file = "\(directory)/missing-ca.pem"
            [auth]
            token_file = "\(directory)/missing-token"
            [ipc]
            group = "no-such-group-imagent"
            [store]
            directory = "/etc/passwd/state"
            """.write(toFile: path, atomically: true, encoding: .utf8)
        let result = try await run(RealDaemon.binary, ["--check-config", path])
        #expect(result.status == 78)
        #expect(result.stderr == """
            \(path):4: server.tls.ca_file: cannot read \(directory)/missing-ca.pem: No such file or directory
            \(path):6: auth.token_file: cannot read \(directory)/missing-token: No such file or directory
            \(path):8: ipc.group: no group named "no-such-group-imagent" on this system (see getent group)
            \(path):10: store.directory: /etc/passwd/state cannot be created: /etc/passwd is not a directory

            """, "\(result.stderr)")

        // No endpoints is no error: the daemon starts unconfigured, and says so.
        try "[auth]\ntoken_file = \"\(path)\"\n[store]\ndirectory = \"\(directory)/state\"\n"
            .write(toFile: path, atomically: true, encoding: .utf8)
        let note = try await run(RealDaemon.binary, ["--check-config", path])
        #expect(note.status == 0, "\(note.stderr)")
        #expect(note.stdout.contains("\(path): valid\n\(path): note: imagentd will start unconfigured: no endpoints"))
    }

    @Test func aReloadThatMovesTheLink_losesNothing_andDeliversEachMessageOnce() async throws {
        try await withRealDaemon { daemon in
            _ = try await daemon.waitForLink("connected")
            let opened = try await daemon.imagent(["open", "-q", "echo"])
            let session = opened.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            let lines = (1...300).map { "message \($0)" }
            // The server stops reading: every message is in flight, none acknowledged, when the link moves.
            #expect(await daemon.server.execute(line: "stall on").hasPrefix("ok"))
            let sent = try await daemon.imagent(["send", session, "--lines"], stdin: lines.joined(separator: "\n") + "\n")
            #expect(sent.status == 0, "\(sent.stderr)")
            let before = try await daemon.imagent(["sessions", "--json"])
            #expect(before.stdout.contains("\"acked_seq\":0"), "\(before.stdout)")
            // The same server under another name: [server] endpoints changes, the link moves.
            let port = daemon.server.address.split(separator: ":").last.map(String.init) ?? ""
            let text = try String(contentsOfFile: daemon.configPath, encoding: .utf8)
                .replacingOccurrences(of: daemon.server.address, with: "localhost:\(port)")
            try text.write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
            let reload = try await daemon.imagent(["reload", "--json"])
            #expect(reload.stdout.contains("\"applied_by_reconnect\":[\"server.endpoints\"]"), "\(reload.stdout) \(reload.stderr)")
            #expect(await daemon.server.execute(line: "stall off").hasPrefix("ok"))
            let status = try await daemon.waitForLink("connected")
            let link = try #require(status["link"] as? [String: Any])
            #expect(link["endpoint"] as? String == "localhost:\(port)")
            #expect(link["reconnects"] as? Int == 1, "the reload's reconnect counts as one: \(link)")

            let heard = try await daemon.imagent(["listen", session, "--count", "300", "--json"], stdin: nil)
            #expect(heard.status == 0, "\(heard.stderr)")
            let texts = heard.stdoutLines.compactMap { line in
                (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["text"] as? String
            }
            #expect(texts == lines, "each message exactly once, in order")
        }
    }
}
