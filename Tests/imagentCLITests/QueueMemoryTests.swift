import AgentIPC
import Foundation
import Testing

/// Issue 10's acceptance: the store is the queue. More than 200 MiB of 16 KiB
/// messages queue while the server is down, the daemon is killed (-9) and
/// started again on that store, then the server comes back: imagentd's
/// anonymous memory (`RssAnon`) stays small while queued and after the
/// restart, and `imagent-loadgen` checks that every echo arrives exactly once,
/// in order, intact. Real processes: `imagentd`, `imagent-refserver`,
/// `imagent-loadgen`.
@Suite(.serialized)
struct QueueMemoryTests {
    static let sessions = 4
    /// 4 × 3,300 × 16 KiB = 206 MiB (below `[limits] outbox_messages`' 10,000 per session).
    static let messagesPerSession = 3_300
    static let payloadBytes = 16 << 10
    static let rssLimit = 48 << 20

    @Test(.timeLimit(.minutes(10)))
    func twoHundredMiBQueuedWhileTheServerIsDown_restartedDaemon_memoryStaysSmall_everyMessageOnceInOrder() async throws {
        try await withLoadCluster { cluster in
            try await cluster.stopServer()
            let loadgen = try cluster.startLoadgen(tag: 1, arguments: [
                "--sessions", "\(Self.sessions)", "--messages", "\(Self.messagesPerSession)", "--size", "\(Self.payloadBytes)",
                "--window", "64", "--deadline", "500",
            ])
            let total = Self.sessions * Self.messagesPerSession
            try await queueRestartAndDrain(cluster, loadgen, total: total, payloadBytes: Self.payloadBytes,
                                           queueWithin: .seconds(300), drainWithin: .seconds(480))
            #expect(total * Self.payloadBytes >= 200 << 20)
        }
    }

    /// The same with many small messages: memory must not grow with the queue's length either
    /// (no entry per queued message). `IMAGENT_SMALL_QUEUE_MESSAGES` sets the total (default
    /// 250,000 × 64 B, what a debug build queues in about a minute here; more in BENCHMARKS.md).
    @Test(.timeLimit(.minutes(15)))
    func manySmallMessagesQueuedWhileTheServerIsDown_restartedDaemon_memoryStaysSmall_everyMessageOnceInOrder() async throws {
        let sessions = 10
        let total = ProcessInfo.processInfo.environment["IMAGENT_SMALL_QUEUE_MESSAGES"].flatMap(Int.init) ?? 250_000
        let perSession = total / sessions
        let configuration = """
            [limits]
            outbox_messages = \(perSession + 1)
            inbox_messages = \(perSession + 1)
            """
        try await withLoadCluster(extraConfig: configuration) { cluster in
            try await cluster.stopServer()
            let loadgen = try cluster.startLoadgen(tag: 2, arguments: [
                "--sessions", "\(sessions)", "--messages", "\(perSession)", "--size", "64", "--window", "256", "--deadline", "800",
            ])
            try await queueRestartAndDrain(cluster, loadgen, total: sessions * perSession, payloadBytes: 64,
                                           queueWithin: .seconds(400), drainWithin: .seconds(600))
        }
    }

    /// The scenario both tests share, with the server stopped and `loadgen` sending: every
    /// message queues while imagentd's `RssAnon` is sampled; imagentd is killed (-9) and
    /// started again on that store (start-up reads no payload); the server comes back and
    /// the loadgen checks that every echo arrives exactly once, in order, intact.
    private func queueRestartAndDrain(_ cluster: LoadCluster, _ loadgen: LoadCluster.Loadgen, total: Int, payloadBytes: Int,
                                      queueWithin: Duration, drainWithin: Duration) async throws {
        var queuedPeak = 0
        var queued = 0
        let started = ContinuousClock.now
        while queued < total {
            #expect(ContinuousClock.now < started + queueWithin, "only \(queued) of \(total) messages queued in \(queueWithin)")
            guard ContinuousClock.now < started + queueWithin, loadgen.isRunning else { break }
            queuedPeak = max(queuedPeak, cluster.daemonAnonymousRSS() ?? 0)
            queued = try await outbox(cluster)
            try await Task.sleep(for: .milliseconds(200))
        }
        queuedPeak = max(queuedPeak, cluster.daemonAnonymousRSS() ?? 0)
        print("queued \(queued) messages of \(payloadBytes) B (\((queued * payloadBytes) >> 20) MiB) in \(ContinuousClock.now - started) with the server down; imagentd RssAnon peak \(queuedPeak >> 20) MiB")
        #expect(queued == total)
        #expect(queuedPeak > 0 && queuedPeak <= Self.rssLimit, "RssAnon \(queuedPeak) bytes while queued")

        try await cluster.killAndRestartDaemon()
        var restartedPeak = 0
        for _ in 0..<15 {
            restartedPeak = max(restartedPeak, cluster.daemonAnonymousRSS() ?? 0)
            try await Task.sleep(for: .milliseconds(200))
        }
        let requeued = try await outbox(cluster)
        print("after kill -9 and restart: \(requeued) messages queued; imagentd RssAnon peak \(restartedPeak >> 20) MiB")
        #expect(requeued == total)
        #expect(restartedPeak > 0 && restartedPeak <= Self.rssLimit, "RssAnon \(restartedPeak) bytes after the restart")

        let drainStart = ContinuousClock.now
        try await cluster.startServer()
        var drainPeak = 0
        while loadgen.isRunning, ContinuousClock.now < drainStart + drainWithin {
            drainPeak = max(drainPeak, cluster.daemonAnonymousRSS() ?? 0)
            try await Task.sleep(for: .milliseconds(200))
        }
        let report = try await loadgen.wait(within: .seconds(30))
        print("drained in \(ContinuousClock.now - drainStart); imagentd RssAnon peak while draining \(drainPeak >> 20) MiB; \(report.json)")
        #expect(report.status == 0, "\(report.json)\n\(report.stderr)\n\(cluster.tail("imagentd.log"))")
        #expect(report.int("received") == total)
        #expect(report.int("lost") == 0 && report.int("duplicated") == 0)
        #expect(report.int("out_of_order") == 0 && report.int("seq_gaps") == 0)
    }

    /// Outbound messages the daemon holds (STATUS `sessions.outbox`), over a connection of
    /// its own (no child process per poll: Foundation's Process misbehaves when run often).
    private func outbox(_ cluster: LoadCluster) async throws -> Int {
        guard let client = try? await IPCClient.connect(socketPath: cluster.socketPath, clientName: "queue-memory") else { return 0 }
        defer { Task { await client.close() } }
        guard let text = try? await client.status(),
              let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
              let sessions = object["sessions"] as? [String: Any], let outbox = sessions["outbox"] as? NSNumber else { return 0 }
        return outbox.intValue
    }
}
