import AgentIPC
import Foundation
import IMAgentTestKit
import Testing

/// `[metrics] prometheus_listen` on a real daemon, scraped over HTTP and
/// parsed by Prometheus' own Python parser (Debian's python3-prometheus-client).
@Suite(.serialized, .timeLimit(.minutes(2)))
struct MetricsEndpointTests {
    /// Debian's interpreter: the parser is Debian's package, not in a pyenv.
    static let python = "/usr/bin/python3"

    @Test func scrape_parsesCleanly_everyFamilyHasHelpAndType_andMatchesMETRICS() async throws {
        let port = try freeLoopbackPort()
        try await withRealDaemon(extraConfig: "[metrics]\nprometheus_listen = \"127.0.0.1:\(port)\"") { daemon in
            _ = try await daemon.waitForLink("connected")
            let opened = try await daemon.imagent(["open", "echo", "--json"])
            #expect(opened.status == 0, "\(opened.stderr)")

            let scrape = try await parse(url: "http://127.0.0.1:\(port)/metrics")
            let families = try #require(scrape["families"] as? [String: [String: Any]], "\(scrape)")
            for (name, family) in families {
                #expect((family["help"] as? String)?.isEmpty == false, "\(name) has no HELP")
                #expect(family["type"] as? String != "unknown", "\(name) has no TYPE")
            }
            #expect(value(families, "imagentd_build_info", labels: ["version": "0.1.0"]) == 1)
            #expect(value(families, "imagentd_link_up") == 1)
            #expect(value(families, "imagentd_sessions") == 1)
            #expect((value(families, "imagentd_link_connect_attempts_total") ?? 0) >= 1)
            // The link came up through token, resolve, tcp, hello and login (no TLS on loopback here).
            for stage in ["token", "resolve", "tcp", "hello", "login"] {
                #expect((value(families, "imagentd_link_handshake_stage_seconds_count", labels: ["stage": stage]) ?? 0) >= 1,
                        "no \(stage) stage timed")
            }
            #expect(value(families, "imagentd_link_handshake_stage_seconds_count", labels: ["stage": "tls"]) == 0)

            // METRICS over the socket: the same names and values.
            let json = try await daemon.imagent(["metrics", "--json"])
            let metrics = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
            let counters = try #require(metrics["counters"] as? [String: Any])
            let gauges = try #require(metrics["gauges"] as? [String: Any])
            #expect((counters["link_connect_attempts_total"] as? NSNumber)?.doubleValue == value(families, "imagentd_link_connect_attempts_total"))
            #expect((gauges["sessions"] as? NSNumber)?.doubleValue == 1)
            // The same set: every family of the scrape is in METRICS under its name without the prefix,
            // in the section of its type, and in `imagent metrics`' human output.
            let human = try await daemon.imagent(["metrics"])
            #expect(human.status == 0, "\(human.stderr)")
            let sections = ["counter": "counters", "gauge": "gauges", "histogram": "histograms"]
            for (name, family) in families {
                let section = try #require(sections[family["type"] as? String ?? ""], "\(name): \(family)")
                let key = String(name.dropFirst("imagentd_".count)) + (family["type"] as? String == "counter" ? "_total" : "")
                #expect((metrics[section] as? [String: Any])?[key] != nil, "\(key) is not in METRICS' \(section)")
                #expect(human.stdout.contains("  " + key), "\(key) is not in imagent metrics' output:\n\(human.stdout)")
            }
            #expect((gauges["link_up"] as? NSNumber)?.doubleValue == 1)
            // `imagent metrics --prometheus` prints what the endpoint serves: the same families.
            let text = try await daemon.imagent(["metrics", "--prometheus"])
            let fromCLI = try await parse(text: text.stdout)
            #expect(Set((fromCLI["families"] as? [String: Any])?.keys ?? [:].keys) == Set(families.keys))

            #expect(try await status(url: "http://127.0.0.1:\(port)/other") == 404)
            #expect(try await status(url: "http://127.0.0.1:\(port)/metrics", method: "POST") == 405)
        }
    }

    @Test func frameAndByteCounters_matchWhatTheServerCounted() async throws {
        let port = try freeLoopbackPort()
        try await withRealDaemon(extraConfig: "[metrics]\nprometheus_listen = \"127.0.0.1:\(port)\"") { daemon in
            _ = try await daemon.waitForLink("connected")
            let opened = try await daemon.imagent(["open", "echo", "--json"])
            let session = try #require((try JSONSerialization.jsonObject(with: Data(opened.stdout.utf8)) as? [String: Any])?["session"] as? NSNumber)
            let sent = try await daemon.imagent(["send", "\(session)", "--lines"], stdin: (1...50).map { "m\($0)\n" }.joined())
            #expect(sent.status == 0, "\(sent.stderr)")
            let heard = try await daemon.imagent(["--timeout", "30", "listen", "\(session)", "--count", "50"])
            #expect(heard.status == 0, "\(heard.stderr)")

            // Both ends count every frame; between heartbeats they agree exactly.
            var last = ""
            for _ in 0..<50 {
                let scrape = try await parse(url: "http://127.0.0.1:\(port)/metrics")
                let families = try #require(scrape["families"] as? [String: [String: Any]])
                let stats = await daemon.server.execute(line: "stats")
                let server = try #require(try JSONSerialization.jsonObject(with: Data(stats.dropFirst(3).utf8)) as? [String: Any])
                let (framesIn, framesOut) = ((server["frames_in"] as? NSNumber)?.doubleValue, (server["frames_out"] as? NSNumber)?.doubleValue)
                let (sentFrames, receivedFrames) = (value(families, "imagentd_link_sent_frames_total"),
                                                    value(families, "imagentd_link_received_frames_total"))
                last = "daemon sent \(sentFrames ?? -1) received \(receivedFrames ?? -1); server in \(framesIn ?? -1) out \(framesOut ?? -1)"
                if sentFrames == framesIn, receivedFrames == framesOut {
                    // 50 DATA up and 50 echoes down, each at least its 32-byte header and payload.
                    #expect((sentFrames ?? 0) >= 50 + 2)
                    #expect((value(families, "imagentd_link_sent_bytes_total") ?? 0) >= 50 * (32 + 2))
                    #expect((value(families, "imagentd_link_received_bytes_total") ?? 0) >= 50 * (32 + 2))
                    return
                }
                try await Task.sleep(for: .milliseconds(100))
            }
            Issue.record("the frame counters never matched the server's: \(last)")
        }
    }

    @Test func dataUnacknowledgedWhenTheLinkDrops_isCountedResent_andTheReconnectByItsCause() async throws {
        let port = try freeLoopbackPort()
        try await withRealDaemon(extraConfig: "[metrics]\nprometheus_listen = \"127.0.0.1:\(port)\"") { daemon in
            _ = try await daemon.waitForLink("connected")
            let opened = try await daemon.imagent(["open", "echo", "-q"])
            let session = opened.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            // OPEN returns before the server's OPEN_OK: a server that stalls before it would hold the DATA back
            // until the next link, where it goes for the first time. Stall once the session is open upstream.
            let openUpstream = try await poll(within: .seconds(10), every: .milliseconds(20)) { () async throws -> Bool? in
                let listed = try await daemon.imagent(["sessions", "--json"]).stdout
                return listed.contains("\"session\":\(session)") && listed.contains("\"state\":\"open\"") ? true : nil
            }
            try #require(openUpstream != nil, "the session never became open upstream")
            // The server reads nothing: the ten DATA frames written stay unacknowledged, and are lost with the link.
            _ = await daemon.server.execute(line: "stall on")
            let framesBefore = try #require(try await PrometheusScrape(url: "http://127.0.0.1:\(port)/metrics").value("imagentd_link_sent_frames_total"))
            let sent = try await daemon.imagent(["send", session, "--lines"], stdin: (1...10).map { "m\($0)\n" }.joined())
            #expect(sent.status == 0, "\(sent.stderr)")
            // ACCEPTED means stored, not yet written: the link drops only once all ten are on it.
            let written = try await poll(within: .seconds(10), every: .milliseconds(20)) { () async throws -> Bool? in
                let framesNow = try await PrometheusScrape(url: "http://127.0.0.1:\(port)/metrics").value("imagentd_link_sent_frames_total") ?? 0
                return framesNow >= framesBefore + 10 ? true : nil
            }
            try #require(written != nil, "the ten DATA frames were never written on the link")
            _ = await daemon.server.execute(line: "drop")
            _ = await daemon.server.execute(line: "stall off")

            var last: PrometheusScrape?
            for _ in 0..<150 {
                let scrape = try await PrometheusScrape(url: "http://127.0.0.1:\(port)/metrics")
                last = scrape
                if scrape.value("imagentd_link_up") == 1, scrape.value("imagentd_outbox_messages") == 0 { break }
                try await Task.sleep(for: .milliseconds(200))
            }
            let scrape = try #require(last)
            #expect(scrape.value("imagentd_outbox_messages") == 0, "the ten messages never reached the server")
            #expect(scrape.value("imagentd_messages_accepted_total") == 10)
            #expect(scrape.value("imagentd_messages_resent_total") == 10)
            #expect(scrape.value("imagentd_send_ack_seconds_count") == 10)
            let reconnects = try #require(scrape.value("imagentd_link_reconnects_total"))
            #expect(reconnects >= 1)
            #expect(scrape.sum("imagentd_link_reconnects_by_cause_total") == reconnects)
        }
    }

    @Test func messagesNotAcknowledgedByAClientThatLeft_areCountedRedelivered_whenTheNextAttaches() async throws {
        let port = try freeLoopbackPort()
        try await withRealDaemon(extraConfig: "[metrics]\nprometheus_listen = \"127.0.0.1:\(port)\"") { daemon in
            _ = try await daemon.waitForLink("connected")
            let client = try await IPCClient.connect(socketPath: daemon.socketPath, clientName: "no-acks")
            let session = try await client.open(service: "echo").session
            var events = client.events.makeAsyncIterator()
            for n in 1...5 { _ = try await client.send(session: session, text: "m\(n)") }
            // The five echoes arrive; this client acknowledges none and goes away.
            var heard = 0
            while heard < 5, let event = try await events.next() {
                if case .message = event { heard += 1 }
            }
            await client.close()
            let listened = try await daemon.imagent(["--timeout", "30", "listen", "\(session)", "--count", "5"])
            #expect(listened.status == 0, "\(listened.stderr)")
            let scrape = try await PrometheusScrape(url: "http://127.0.0.1:\(port)/metrics")
            #expect(scrape.value("imagentd_messages_received_total") == 5)
            #expect(scrape.value("imagentd_messages_redelivered_total") == 5)
        }
    }

    // MARK: helpers

    /// The sample `name{labels}`'s value in a parsed scrape.
    private func value(_ families: [String: [String: Any]], _ name: String, labels: [String: String] = [:]) -> Double? {
        PrometheusScrape.value(in: families, name, labels: labels)
    }

    /// Fetches and parses with prometheus_client: {"families": {name: {type, help, samples}}}.
    private func parse(url: String? = nil, text: String? = nil) async throws -> [String: Any] {
        ["families": try await PrometheusScrape(url: url, text: text).families]
    }

    /// The HTTP status of one request.
    private func status(url: String, method: String = "GET") async throws -> Int {
        let script = """
            import sys, urllib.request, urllib.error
            try:
                print(urllib.request.urlopen(urllib.request.Request(sys.argv[1], method=sys.argv[2], data=b"" if sys.argv[2] == "POST" else None), timeout=10).status)
            except urllib.error.HTTPError as error:
                print(error.code)
            """
        let output = try await ChildProcess.run(Self.python, ["-c", script, url, method], limit: .seconds(30))
        return try #require(Int(output.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), "\(output.stderr)")
    }
}
