import Foundation
import IMAgentTestKit
import Testing

/// Issue 13's "a scrape during a load run": the real daemon on its SQLite
/// store, the real reference server, `imagent-loadgen` clients, and
/// `[metrics] prometheus_listen` scraped while they run and after.
///
/// What "match" means: the run sends N messages each way (every one echoed
/// once, checked by the load clients). Once it settles (queues empty):
/// - messages: `imagentd_messages_accepted_total`, `imagentd_send_ack_seconds_count`
///   and the server's new inbound DATA are N; `imagentd_messages_received_total`
///   and the server's DATA written are N; nothing resent or redelivered;
/// - frames: every frame on the link each way, of every kind (HELLO, LOGIN,
///   OPEN, DATA, ACK, PING, CLOSE …), counted by the daemon equals what the
///   server counted the other way, exactly, between two heartbeats; the run's
///   frames each way number at least its N DATA.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct MetricsUnderLoadTests {
    static let processes = 4
    static let sessionsPerProcess = 5
    static let messagesPerSession = 250
    static let total = processes * sessionsPerProcess * messagesPerSession

    @Test func aScrapeDuringALoadRun_parses_andItsCountersMatchTheRunsMessages() async throws {
        let port = try freeLoopbackPort()
        let url = "http://127.0.0.1:\(port)/metrics"
        try await withLoadCluster(extraConfig: "[metrics]\nprometheus_listen = \"127.0.0.1:\(port)\"") { cluster in
            let before = try await waitForScrape(url, "the link is up") { $0.value("imagentd_link_up") == 1 }

            let arguments = ["--sessions", "\(Self.sessionsPerProcess)", "--messages", "\(Self.messagesPerSession)",
                             "--window", "32", "--deadline", "180"]
            let loadgens = try (0..<Self.processes).map { try cluster.startLoadgen(tag: $0, arguments: arguments) }
            // Scraped while the load runs (fetched here, in a millisecond: the load may end before the
            // parser has even started), then parsed: each must parse (PrometheusScrape fails the test otherwise).
            var scrapedDuring: [String] = []
            while loadgens.contains(where: \.isRunning) {
                let text = try PrometheusScrape.fetchText(port: port)
                if loadgens.contains(where: \.isRunning) { scrapedDuring.append(text) }
                try await Task.sleep(for: .milliseconds(50))
            }
            let during = scrapedDuring.count
            print("metrics under load: \(during) scrapes while the \(Self.total) messages each way ran")
            // The first, a middle and the last (each parse starts the parser once).
            for index in Set([0, during / 2, during - 1]).sorted() where index >= 0 {
                let scrape = try await PrometheusScrape(text: scrapedDuring[index])
                #expect(scrape.value("imagentd_link_up") == 1)
            }
            let reports = try await loadgens.waitAll(within: .seconds(200))
            for report in reports {
                #expect(report.status == 0 && report.int("lost") == 0 && report.int("duplicated") == 0,
                        "\(report.json)\n\(report.stderr)")
            }
            #expect(reports.reduce(0) { $0 + $1.int("accepted") } == Self.total)
            #expect(reports.reduce(0) { $0 + $1.int("received") } == Self.total)
            #expect(during >= 1, "the load ended before one scrape ran during it")

            // Settled: nothing queued, and the daemon's frame counts equal the server's.
            var server: [String: Any] = [:]
            let after = try await waitForScrape(url, "the queues empty and the frame counts agree with the server") { scrape in
                let stats = try cluster.admin("stats")
                server = try JSONSerialization.jsonObject(with: Data(stats.dropFirst(3).utf8)) as? [String: Any] ?? [:]
                return scrape.value("imagentd_outbox_messages") == 0 && scrape.value("imagentd_inbox_messages") == 0
                    && scrape.value("imagentd_link_sent_frames_total") == (server["frames_in"] as? NSNumber)?.doubleValue
                    && scrape.value("imagentd_link_received_frames_total") == (server["frames_out"] as? NSNumber)?.doubleValue
            }
            let n = Double(Self.total)
            func delta(_ name: String) -> Double { (after.value(name) ?? -1) - (before.value(name) ?? 0) }
            #expect(delta("imagentd_messages_accepted_total") == n)
            #expect(delta("imagentd_send_ack_seconds_count") == n)
            #expect((server["messages_in"] as? NSNumber)?.doubleValue == n)
            #expect(delta("imagentd_messages_received_total") == n)
            #expect((server["messages_out"] as? NSNumber)?.doubleValue == n)
            #expect(after.value("imagentd_messages_resent_total") == 0)
            #expect(after.value("imagentd_messages_redelivered_total") == 0)
            #expect(delta("imagentd_link_sent_frames_total") >= n)
            #expect(delta("imagentd_link_received_frames_total") >= n)
            // Every message stored each way went through a group commit: more operations than commits.
            #expect((after.value("imagentd_store_commit_operations_sum") ?? 0) >= 2 * n)
            let commits = after.value("imagentd_store_commit_seconds_count") ?? 0
            #expect(commits >= 1 && commits == after.value("imagentd_store_commit_operations_count"))
            #expect((after.value("imagentd_link_round_trip_seconds_count") ?? 0) >= 1)

            // The server drops the link: one reconnect, caused by the server's side.
            _ = try cluster.admin("drop")
            let reconnected = try await waitForScrape(url, "one reconnect") {
                $0.value("imagentd_link_up") == 1 && $0.value("imagentd_link_reconnects_total") == 1
            }
            #expect(reconnected.value("imagentd_link_reconnects_by_cause_total", labels: ["cause": "server_refusing"]) == 1)
            #expect(reconnected.sum("imagentd_link_reconnects_by_cause_total") == 1)
        }
    }

    /// Scrapes until `ready` holds (at most 30 s); the last scrape.
    private func waitForScrape(_ url: String, _ what: String,
                               _ ready: (PrometheusScrape) throws -> Bool) async throws -> PrometheusScrape {
        let deadline = ContinuousClock.now + .seconds(30)
        while true {
            let scrape = try await PrometheusScrape(url: url)
            if try ready(scrape) { return scrape }
            guard ContinuousClock.now < deadline else {
                let shown = scrape.families.keys.sorted().compactMap { name in scrape.value(name).map { "\(name)=\($0)" } }
                throw RealDaemonError("waited 30 s for \(what); last scrape: \(shown.joined(separator: " "))")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }
}
