import Foundation
import Testing

private let setprivPath = "/usr/bin/setpriv"
private let pythonPath = "/usr/bin/python3"

/// What STATUS, METRICS and EVENTS show a user who is not an admin, on the real
/// daemon (imagentd(8) SECURITY, imagent-ipc(7) STATUS AND METRICS): the link and
/// that user's own sessions, figures and events; and that one user's churn
/// cannot erase the link's history or another user's.
@Suite(.serialized, .timeLimit(.minutes(3)),
       .enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: setprivPath)
                    && FileManager.default.isExecutableFile(atPath: pythonPath),
                "needs root, setpriv(1) and python3 to act as another uid"))
struct PerUserViewTests {
    static let nobody: UInt32 = 65534

    private func asNobody(_ command: [String], environment: [String: String] = [:],
                          limit: Duration = .seconds(20)) async throws -> ImagentProcess.Result {
        try await ImagentProcess.run(["--reuid=\(Self.nobody)", "--regid=\(Self.nobody)", "--clear-groups"] + command,
                                     environment: environment, limit: limit, executable: URL(fileURLWithPath: setprivPath))
    }

    private func asNobody(_ daemon: RealDaemon, _ arguments: [String]) async throws -> ImagentProcess.Result {
        try await asNobody([ImagentProcess.binary.path, "--socket", daemon.socketPath] + arguments)
    }

    private func json(_ result: ImagentProcess.Result) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any],
                     "\(result.stdout) \(result.stderr)")
    }

    private func openedSession(_ result: ImagentProcess.Result) throws -> UInt64 {
        try #require((try json(result)["session"] as? NSNumber)?.uint64Value, "\(result.stdout) \(result.stderr)")
    }

    @Test func aNonAdminsStatusAndMetrics_countItsOwnQueuedBytes_notEveryones() async throws {
        try await withRealDaemon(socketMode: "0666") { daemon in
            #expect(chmod(daemon.directory, 0o711) == 0)
            _ = try await daemon.waitForLink("connected")
            // With the link down, what is sent stays queued.
            #expect(try await daemon.imagent(["disconnect"]).status == 0)
            _ = try await daemon.waitForLink("stopped")
            let rootSession = try openedSession(try await daemon.imagent(["open", "sink", "--json"]))
            for _ in 0..<3 {
                let sent = try await daemon.imagent(["send", "\(rootSession)", String(repeating: "r", count: 1000)])
                #expect(sent.status == 0, "\(sent.stderr)")
            }
            let ownSession = try openedSession(try await asNobody(daemon, ["open", "sink", "--json"]))
            let sent = try await asNobody(daemon, ["send", "\(ownSession)", "ten bytes!"])
            #expect(sent.status == 0, "\(sent.stderr)")

            let mine = try json(try await asNobody(daemon, ["status", "--json"]))
            let own = try #require(mine["sessions"] as? [String: Any], "\(mine)")
            #expect(own["owner"] as? Int == Int(Self.nobody))
            #expect(own["count"] as? Int == 1 && own["outbox"] as? Int == 1, "\(own)")
            #expect(own["outbox_bytes"] as? Int == 10, "uid 65534 sees its own queued bytes only: \(own)")
            #expect(own["failed"] as? Int == 0 && own["refused_total"] == nil && own["quarantined_total"] == nil,
                    "uid 65534 sees its own failed sessions, not the daemon's totals: \(own)")
            #expect(mine["store"] == nil && (mine["daemon"] as? [String: Any])?["clients"] == nil, "\(mine)")

            let metrics = try json(try await asNobody(daemon, ["metrics", "--json"]))
            let gauges = try #require(metrics["gauges"] as? [String: Any], "\(metrics)")
            #expect(gauges["outbox_bytes"] as? Int == 10 && gauges["outbox_messages"] as? Int == 1, "\(gauges)")
            #expect(gauges["store_memory_bytes"] == nil && metrics["histograms"] == nil && metrics["prometheus"] == nil, "\(metrics)")

            let all = try json(try await daemon.imagent(["status", "--json"]))
            let every = try #require(all["sessions"] as? [String: Any], "\(all)")
            #expect(every["outbox_bytes"] as? Int == 3010 && every["outbox"] as? Int == 4 && every["owner"] == nil, "\(every)")
            #expect(every["refused_total"] as? Int == 0 && every["quarantined_total"] as? Int == 0, "\(every)")
            let allMetrics = try json(try await daemon.imagent(["metrics", "--json"]))
            #expect((allMetrics["gauges"] as? [String: Any])?["outbox_bytes"] as? Int == 3010, "\(allMetrics)")
        }
    }

    /// Opens and closes a session `argv[2]` times on one connection with the Python client library.
    private static let churn = """
        import sys, imagent
        client = imagent.connect(sys.argv[1], name="churn")
        for _ in range(int(sys.argv[2])):
            client.close_session(client.open("sink").id)
        client.close()
        print("done")
        """

    @Test func anotherUidsChurn_leavesTheLinkEventsAndTheOwnersEvents_andEachSeesItsOwnOnly() async throws {
        try await withRealDaemon(socketMode: "0666") { daemon in
            #expect(chmod(daemon.directory, 0o711) == 0)
            _ = try await daemon.waitForLink("connected")
            let rootSession = try openedSession(try await daemon.imagent(["open", "sink", "--json"]))
            #expect(try await daemon.imagent(["reload"]).status == 0)

            // 300 cycles make at least 600 session events, more than the whole history once held.
            let churned = try await asNobody([pythonPath, "-c", Self.churn, daemon.socketPath, "300"],
                                             environment: ["PYTHONPATH": ClientLibrary.root + "/clients/python/src"],
                                             limit: .seconds(90))
            #expect(churned.status == 0 && churned.stdout.contains("done"), "\(churned.stdout) \(churned.stderr)")

            func events(_ result: ImagentProcess.Result) -> [[String: Any]] {
                result.stdoutLines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            }
            func linkStates(_ events: [[String: Any]]) -> [String] {
                events.filter { $0["event"] as? String == "link" }.compactMap { $0["state"] as? String }
            }
            func sessionOwners(_ events: [[String: Any]]) -> Set<Int> {
                Set(events.filter { $0["event"] as? String == "session" }.compactMap { $0["owner"] as? Int })
            }

            let asRoot = try await daemon.imagent(["events", "--json"])
            #expect(asRoot.status == 0, "\(asRoot.stderr)")
            let rootEvents = events(asRoot)
            #expect(linkStates(rootEvents).first == "connecting" && linkStates(rootEvents).last == "connected",
                    "root's history lost the link's events: \(asRoot.stdout.prefix(600))")
            #expect(rootEvents.contains { ($0["session"] as? NSNumber)?.uint64Value == rootSession && $0["change"] as? String == "opened" },
                    "root's own session event is gone")
            #expect(rootEvents.contains { $0["event"] as? String == "reload" })
            #expect(sessionOwners(rootEvents) == [0, Int(Self.nobody)], "an admin sees every user's events")
            // Merged in the order they happened.
            let times = rootEvents.compactMap { ($0["time_ms"] as? NSNumber)?.uint64Value }
            #expect(times == times.sorted(), "\(times)")

            let nobodyView = try await asNobody(daemon, ["events", "--json"])
            #expect(nobodyView.status == 0, "\(nobodyView.stderr)")
            let nobodyEvents = events(nobodyView)
            #expect(linkStates(nobodyEvents).first == "connecting" && linkStates(nobodyEvents).last == "connected",
                    "uid 65534's history lost the link's events: \(nobodyView.stdout.prefix(600))")
            #expect(nobodyEvents.contains { $0["event"] as? String == "reload" }, "reloads are everyone's")
            #expect(sessionOwners(nobodyEvents) == [Int(Self.nobody)], "uid 65534 sees its own session events only")
            #expect(!nobodyEvents.contains { ($0["session"] as? NSNumber)?.uint64Value == rootSession })
            // Its churn filled its own share of the history, and no more.
            let own = nobodyEvents.filter { $0["event"] as? String == "session" }
            #expect(own.count == 64, "uid 65534 keeps its last 64 session events: \(own.count)")
            #expect(own.contains { $0["change"] as? String == "closed" })
        }
    }
}
