import AgentIPC
import Foundation
import IMAgentTestKit
import Testing

/// The `imagentd` binary with a configuration file, driven by the `imagent`
/// binary over its real socket, against the reference server.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct RealDaemonTests {
    @Test func checkConfig_acceptsAValidFile_andListsEveryProblemOfABadOne() async throws {
        try await withRealDaemon { daemon in
            let valid = try await run(RealDaemon.binary, ["--check-config", daemon.configPath])
            #expect(valid.status == 0)
            #expect(valid.stdout == "\(daemon.configPath): valid\n")

            let bad = daemon.directory + "/bad.toml"
            try "[server]\nendpoints = [\"nohost\"]\n[heartbeat]\nmin_seconds = \"ten\"\n".write(toFile: bad, atomically: true, encoding: .utf8)
            let invalid = try await run(RealDaemon.binary, ["--check-config", bad])
            #expect(invalid.status == 78)
            #expect(invalid.stderr.contains("\(bad):2: server.endpoints: \"nohost\" is not host:port"))
            #expect(invalid.stderr.contains("\(bad):4: heartbeat.min_seconds: expected an integer, found a string"))

            let refused = try await run(RealDaemon.binary, ["--config", bad])
            #expect(refused.status == 78)
            #expect(refused.stderr.contains("imagentd: not started; fix the configuration"))
        }
    }

    /// Payloads around and above the size from which they leave as buffers of their own, with
    /// their CRC computed once, come back from the reference server's echo byte for byte.
    @Test func largePayloads_echoByteExact() async throws {
        try await withRealDaemon { daemon in
            _ = try await daemon.waitForLink("connected")
            try await expectLargeEchoesByteExact(socketPath: daemon.socketPath)
        }
    }

    @Test func daemonConnects_andAnswersStatusPingAndMetrics() async throws {
        try await withRealDaemon { daemon in
            let status = try await daemon.waitForLink("connected")
            let link = try #require(status["link"] as? [String: Any])
            #expect(link["endpoint"] as? String == daemon.server.address)
            #expect((link["heartbeat_s"] as? Double).map { $0 >= 1 && $0 <= 2 } == true)

            let human = try await daemon.imagent(["status"])
            #expect(human.status == 0)
            #expect(human.stdout.contains("connected"))

            let ping = try await daemon.imagent(["ping"])
            #expect(ping.status == 0)
            #expect(ping.stdout.hasPrefix("pong from imagentd"))

            let metrics = try await daemon.imagent(["metrics", "--prometheus"])
            #expect(metrics.stdout.contains("imagentd_link_up 1.0"))
        }
    }

    @Test func adminOps_disconnectAndConnectTheLink_andWatchSeesIt() async throws {
        try await withRealDaemon { daemon in
            _ = try await daemon.waitForLink("connected")
            // WATCH shows only what happens after its OK: subscribe first (a CLI `watch` started
            // beside the disconnect could subscribe after it on a loaded machine and wait forever).
            let watcher = try await IPCClient.connect(socketPath: daemon.socketPath, clientName: "watcher")
            var events = try await watcher.watch().makeAsyncIterator()
            #expect(try await daemon.imagent(["disconnect"]).status == 0)
            _ = try await daemon.waitForLink("stopped")
            var states: [String] = []
            while !states.contains("stopped"), let event = try await events.next() {
                guard case .watch(let document) = event,
                      let object = try JSONSerialization.jsonObject(with: Data(document.json.utf8)) as? [String: Any],
                      object["event"] as? String == "link" else { continue }
                states.append(object["state"] as? String ?? "?")
            }
            #expect(states.last == "stopped", "link events seen: \(states)")
            await watcher.close()
            #expect(try await daemon.imagent(["connect"]).status == 0)
            _ = try await daemon.waitForLink("connected")

            let reconnect = try await daemon.imagent(["reconnect", "--json"])
            #expect(reconnect.status == 0, "\(reconnect.stderr)")
            let status = try await daemon.waitForLink("connected")
            #expect((status["link"] as? [String: Any])?["reconnects"] as? Int == 2)

            #expect(try await daemon.imagent(["reload"]).status == 0)
            try "[server]\nendpoints = [\"broken\"]\n".write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
            let refused = try await daemon.imagent(["reload"])
            #expect(refused.status == 4)
            #expect(refused.stderr.contains("server.endpoints: \"broken\" is not host:port"), "\(refused.stderr)")
            #expect(try await daemon.imagent(["ping", "--json"]).stdout.contains("\"seq\""))
        }
    }

    @Test func serverRestart_isSurvived_andSighupReloadsWithoutDroppingTheLink() async throws {
        try await withRealDaemon { daemon in
            _ = try await daemon.waitForLink("connected")
            #expect(await daemon.server.execute(line: "drop").hasPrefix("ok"))
            _ = try await daemon.waitForLink("connected")

            let text = try String(contentsOfFile: daemon.configPath, encoding: .utf8)
            try (text + "[log]\nlevel = \"debug\"\n").write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
            daemon.signal(SIGHUP)
            try await Task.sleep(for: .milliseconds(500))
            #expect(daemon.process.isRunning)
            #expect(daemon.log.contains("configuration reloaded"))
            let status = try await daemon.waitForLink("connected")
            #expect((status["link"] as? [String: Any])?["reconnects"] as? Int == 1)
        }
    }

    @Test func sigterm_shutsDownCleanly_andRemovesTheSocket() async throws {
        try await withRealDaemon { daemon in
            _ = try await daemon.waitForLink("connected")
            daemon.signal(SIGTERM)
            let status = await daemon.waitForExit(within: .seconds(10))
            #expect(status == 0, "daemon log:\n\(daemon.log)")
            #expect(!FileManager.default.fileExists(atPath: daemon.socketPath))
            #expect(daemon.log.contains("imagentd stopped"))
            let down = try await daemon.imagent(["status"])
            #expect(down.status == 2)
        }
    }

    @Test func sessionSubcommands_openSendListenSessionsClose_throughTheEchoService() async throws {
        try await withRealDaemon { daemon in
            _ = try await daemon.waitForLink("connected")
            let opened = try await daemon.imagent(["open", "echo", "--json"])
            #expect(opened.status == 0, "\(opened.stderr)")
            let document = try JSONSerialization.jsonObject(with: Data(opened.stdout.utf8)) as? [String: Any]
            let session = try #require((document?["session"] as? NSNumber)?.uint64Value)

            let sent = try await daemon.imagent(["send", "\(session)", "--lines"], stdin: "one\ntwo\nthree\n")
            #expect(sent.status == 0, "\(sent.stderr)")
            #expect(sent.stdout.contains("accepted seq 3"))

            let heard = try await daemon.imagent(["listen", "\(session)", "--count", "3", "--json"])
            #expect(heard.status == 0, "\(heard.stderr)")
            let texts = heard.stdoutLines.compactMap { line in
                (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["text"] as? String
            }
            #expect(texts == ["one", "two", "three"])

            // Acknowledged by listen: a second listener gets nothing old.
            let listed = try await daemon.imagent(["sessions", "--json"])
            #expect(listed.stdout.contains("\"delivered_seq\":3"), "\(listed.stdout)")
            #expect(try await daemon.imagent(["close", "\(session)"]).status == 0)
            let reopened = try await daemon.imagent(["open", "--session", "\(session)"])
            #expect(reopened.status == 4)
            #expect(reopened.stderr.contains("SESSION_CLOSED"), "\(reopened.stderr)")
        }
    }

    /// examples/python on the `imagent` package from the source tree (it falls back to clients/python/src).
    @Test func pythonExample_onThePackage_statusEchoAndNoDaemon() async throws {
        try await withRealDaemon { daemon in
            _ = try await daemon.waitForLink("connected")
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent("examples/python/imagent_client.py").path
            let python = URL(fileURLWithPath: "/usr/bin/python3")
            let status = try await run(python, [script, "--socket", daemon.socketPath, "status"])
            #expect(status.status == 0, "\(status.stderr)")
            #expect(status.stdout.contains("\"state\": \"connected\""))
            let echo = try await run(python, [script, "--socket", daemon.socketPath, "echo", "echo", "héllo", "wörld"])
            #expect(echo.status == 0, "\(echo.stderr)")
            #expect(echo.stdout == "héllo\nwörld\n")
            let down = try await run(python, [script, "--socket", daemon.directory + "/absent.sock", "ping"])
            #expect(down.status == 2)
        }
    }

    @Test func aSecondDaemon_onTheSameSocket_refusesToStart() async throws {
        try await withRealDaemon { daemon in
            // Its own store, so that the socket is what it is refused for.
            let store = daemon.directory + "/second-store"
            let config = try String(contentsOfFile: daemon.configPath, encoding: .utf8)
                .replacingOccurrences(of: "[store]\ndirectory = \"\(daemon.directory)\"", with: "[store]\ndirectory = \"\(store)\"")
            try #require(config.contains(store))
            try config.write(toFile: daemon.directory + "/second.toml", atomically: true, encoding: .utf8)
            let second = try await run(RealDaemon.binary, ["--config", daemon.directory + "/second.toml"])
            #expect(second.status != 0)
            #expect(second.stderr.contains("another imagentd is already serving \(daemon.socketPath)"))
            #expect(try await daemon.imagent(["ping"]).status == 0)
        }
    }

    @Test func aSecondDaemon_onTheSameStore_refusesToStart() async throws {
        try await withRealDaemon { daemon in
            let second = try await run(RealDaemon.binary, ["--config", daemon.configPath])
            #expect(second.status == 1)
            #expect(second.stderr.contains("the store \(daemon.directory) is in use by another process"), "\(second.stderr)")
            #expect(try await daemon.imagent(["ping"]).status == 0)
        }
    }
}

/// Runs a binary to completion (bounded) and collects its output.
func run(_ binary: URL, _ arguments: [String]) async throws -> ImagentProcess.Result {
    let output = try await ChildProcess.run(binary.path, arguments, setting: ["SWIFT_BACKTRACE": "enable=no"],
                                            limit: .seconds(20))
    return ImagentProcess.Result(status: output.signaled ? 128 + output.status : output.status,
                                 stdout: output.stdout, stderr: output.stderr)
}
