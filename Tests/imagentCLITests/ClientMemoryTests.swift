import AgentIPC
import Foundation
import Synchronization
import Testing

/// Issue 26's acceptance: every byte the daemon holds for a client is counted. With the
/// server down, one client pipelines 1,000 SENDs of about 1 MiB without waiting for
/// ACCEPTED while another asks for STATUS over and over and never reads a reply. The
/// daemon's anonymous memory (`RssAnon`) stays at most 64 MiB: the first client's socket is
/// no longer read while its SENDs wait for the store, and the second's replies are bounded.
/// Then the server comes back and every message is echoed exactly once, in order. Real
/// processes: `imagentd`, `imagent-refserver`, `imagent-loadgen`.
@Suite(.serialized)
struct ClientMemoryTests {
    static let messages = 1_000
    /// 1 MiB less 1 KiB, so that a DATA frame with its header fits the reference server's
    /// MAX_FRAME of 1 MiB.
    static let payloadBytes = (1 << 20) - 1024
    static let rssLimit = 64 << 20

    @Test(.timeLimit(.minutes(10)))
    func aClientPipeliningAGibibyte_andOneThatNeverReads_holdTheDaemonUnder64MiB_andEveryMessageArrivesOnce() async throws {
        try await withLoadCluster { cluster in
            try await cluster.stopServer()
            let loadgen = try cluster.startLoadgen(tag: 1, arguments: [
                "--sessions", "1", "--messages", "\(Self.messages)", "--size", "\(Self.payloadBytes)",
                "--window", "\(Self.messages)", "--ack-every", "16", "--deadline", "500",
            ])
            let stop = Atomic<Bool>(false)
            let statusRequests = Atomic<Int>(0)
            let socketPath = cluster.socketPath
            let nonReader = Task.detached {
                await onThreads(1) { _ in Self.askWithoutReading(socketPath, until: stop, counting: statusRequests) }
            }

            var peak = 0
            var queued = 0
            let started = ContinuousClock.now
            while queued < Self.messages, ContinuousClock.now < started + .seconds(300), loadgen.isRunning {
                peak = max(peak, cluster.daemonAnonymousRSS() ?? 0)
                queued = try await stored(cluster)
                try await Task.sleep(for: .milliseconds(100))
            }
            for _ in 0..<10 {
                peak = max(peak, cluster.daemonAnonymousRSS() ?? 0)
                try await Task.sleep(for: .milliseconds(100))
            }
            stop.store(true, ordering: .relaxed)
            await nonReader.value
            print("\(queued) messages of \(Self.payloadBytes) B queued in \(ContinuousClock.now - started) with the server down, "
                  + "beside \(statusRequests.load(ordering: .relaxed)) STATUS requests never read; imagentd RssAnon peak \(peak >> 20) MiB")
            #expect(queued == Self.messages)
            #expect(statusRequests.load(ordering: .relaxed) > 10_000, "the client that never reads asked too little to matter")
            #expect(peak > 0 && peak <= Self.rssLimit, "RssAnon \(peak) bytes while queueing")

            try await cluster.startServer()
            let report = try await loadgen.wait(within: .seconds(480))
            print("after the server came back: \(report.json)")
            #expect(report.status == 0, "\(report.json)\n\(report.stderr)\n\(cluster.tail("imagentd.log"))")
            #expect(report.int("received") == Self.messages)
            #expect(report.int("lost") == 0 && report.int("duplicated") == 0)
            #expect(report.int("out_of_order") == 0 && report.int("seq_gaps") == 0)
        }
    }

    /// HELLO, then STATUS requests as fast as the socket takes them, never reading; when the
    /// daemon gives up on the connection, a new one, until `stop`.
    private static func askWithoutReading(_ path: String, until stop: borrowing Atomic<Bool>, counting asked: borrowing Atomic<Int>) {
        let batch = (0..<256).flatMap { RawIPCSocket.frame(op: 0x0010, request: UInt32(2 + $0)) }
        while !stop.load(ordering: .relaxed) {
            guard let socket = try? RawIPCSocket(path: path, timeout: .seconds(1)), socket.write(RawIPCSocket.hello()) else {
                usleep(50_000)
                continue
            }
            // A write that times out (the daemon stopped reading) or fails (it closed) ends this connection.
            while !stop.load(ordering: .relaxed), socket.write(batch) {
                asked.add(256, ordering: .relaxed)
            }
        }
    }

    /// Outbound messages stored and not yet acknowledged by the server (STATUS `sessions.outbox`
    /// counts those being stored too; ACCEPTED follows storage, so once it reaches the total
    /// after the loadgen's SENDs, they are all stored or nearly).
    private func stored(_ cluster: LoadCluster) async throws -> Int {
        guard let client = try? await IPCClient.connect(socketPath: cluster.socketPath, clientName: "client-memory") else { return 0 }
        defer { Task { await client.close() } }
        guard let text = try? await client.status(),
              let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
              let sessions = object["sessions"] as? [String: Any], let outbox = sessions["outbox"] as? NSNumber else { return 0 }
        return outbox.intValue
    }
}
