import AgentIPC
import Foundation
import IMAgentTestKit
import NIOCore
import Testing

/// Features of `imagent-ipc(7)` through the real daemon and the reference
/// server: TTL and EXPIRED, DURABLE = 0, a too-large PAYLOAD failing that
/// SEND only, session events to WATCH, and the store's figures in METRICS.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct IPCFeatureTests {
    @Test func ttl_expiresAMessageTheServerNeverGot_andTheOthersStillArriveInOrder() async throws {
        try await withRealDaemon { daemon in
            _ = try await daemon.waitForLink("connected")
            let client = try await IPCClient.connect(socketPath: daemon.socketPath, clientName: "ttl")
            let session = try await client.open(service: "echo").session
            var events = client.events.makeAsyncIterator()

            // The link is down: nothing can reach the server.
            try await client.disconnectLink()
            _ = try await daemon.waitForLink("stopped")
            let clock = ContinuousClock()
            let start = clock.now
            #expect(try await client.send(session: session, text: "one") == 1)
            #expect(try await client.send(session: session, text: "two", ttl: .milliseconds(300)) == 2)
            #expect(try await client.send(session: session, text: "three", ttl: .seconds(600)) == 3)
            var expired: [IPCMessage.Expired] = []
            while expired.isEmpty, let event = try await events.next() {
                if case .expired(let message) = event { expired.append(message) }
            }
            print("ttl: EXPIRED for seq \(expired.first?.seq ?? 0) after \(clock.now - start) (TTL 300 ms, link down)")
            #expect(expired.map(\.seq) == [2])
            #expect(expired.first?.code == .expired)

            // The link comes back: 1 and 3 go out with no gap on the wire, and echo back; 4 follows.
            try await client.connectLink()
            try await client.send(session: session, text: "four")
            var echoes: [String] = []
            var acked: UInt64 = 0
            while echoes.count < 3 || acked < 4, let event = try await events.next() {
                switch event {
                case .message(let message):
                    echoes.append(String(buffer: message.payload))
                    try await client.ack(session: session, seq: message.seq)
                case .acked(let ack): acked = ack.seq
                case .expired(let message): expired.append(message)
                case .error(let error): Issue.record("ERROR \(error)")
                case .sessionState, .linkState, .watch: continue
                }
            }
            #expect(echoes == ["one", "three", "four"])
            #expect(acked == 4)
            #expect(expired.count == 1)
            let metrics = try await client.metrics()
            #expect(metrics.contains("\"messages_expired_total\":1"), "\(metrics)")
            #expect(daemon.log.contains("gap") == false, "the server saw a seq gap: \(daemon.log.suffix(2000))")
            await client.close()
        }
    }

    @Test func ttl_givenUpBeforeAKillNine_stillLeavesNoGapAfterTheRestart() async throws {
        var daemon = try await RealDaemon.start()
        do {
            _ = try await daemon.waitForLink("connected")
            var client = try await IPCClient.connect(socketPath: daemon.socketPath, clientName: "ttl-restart")
            let session = try await client.open(service: "echo").session
            try await waitUntilOpen(client, [session])
            // Seq 1 reaches the server and is acknowledged; then the link goes down.
            try await client.send(session: session, text: "first")
            var events = client.events.makeAsyncIterator()
            var echoes: [String] = []
            while echoes.isEmpty, let event = try await events.next() {
                if case .message(let message) = event {
                    echoes.append(String(buffer: message.payload))
                    try await client.ack(session: session, seq: message.seq)
                }
            }
            try await client.disconnectLink()
            _ = try await daemon.waitForLink("stopped")
            try await client.send(session: session, text: "gone", ttl: .milliseconds(200))
            try await client.send(session: session, text: "kept")
            while let event = try await events.next() {
                if case .expired(let expired) = event {
                    #expect(expired.seq == 2)
                    break
                }
            }
            await client.close()
            // The store alone must say that wire seq 2 is IPC seq 3 now.
            daemon.signal(SIGKILL)
            _ = await daemon.waitForExit(within: .seconds(5))
            daemon = try await daemon.restarted()
            _ = try await daemon.waitForLink("connected")
            client = try await IPCClient.connect(socketPath: daemon.socketPath, clientName: "ttl-restart")
            _ = try await client.attach(session: session)
            events = client.events.makeAsyncIterator()
            while echoes.count < 2, let event = try await events.next() {
                if case .message(let message) = event {
                    echoes.append(String(buffer: message.payload))
                    try await client.ack(session: session, seq: message.seq)
                }
            }
            #expect(echoes == ["first", "kept"])
            let sessions = try await client.sessions()
            #expect(sessions.contains("\"acked_seq\":3"), "\(sessions)")
            #expect(!daemon.log.contains("gap"), "\(daemon.log.suffix(2000))")
            await client.close()
        } catch {
            await daemon.stop()
            throw error
        }
        await daemon.stop()
    }

    @Test func aMessageAboveTheServersMaxFrame_failsAlone_theLinkAndTheOthersGoOn() async throws {
        // The server takes 64 KiB frames; the daemon accepts 1 MiB payloads from clients.
        try await withRealDaemon(serverMaxFrame: 65_536) { daemon in
            _ = try await daemon.waitForLink("connected")
            try await expectOversizedMessageFailsAlone(socketPath: daemon.socketPath, size: 100_000, limit: "the server's MAX_FRAME")
        }
    }

    @Test func notDurable_dropsWhatArrivesWhileDetached_durableKeepsIt() async throws {
        try await withRealDaemon { daemon in
            _ = try await daemon.waitForLink("connected")
            let client = try await IPCClient.connect(socketPath: daemon.socketPath, clientName: "durable")
            let volatile = try await client.open(service: "sink", durable: false).session
            let kept = try await client.open(service: "sink").session
            var events = client.events.makeAsyncIterator()
            try await waitUntilOpen(client, [volatile, kept])

            try await client.detach(session: volatile)
            try await client.detach(session: kept)
            for session in [volatile, kept] {
                #expect(await daemon.server.execute(line: "push \(session) 5 16 0").hasPrefix("ok"))
            }
            // Both stored all five (RESUME_AFTER stays right); only the durable one keeps them.
            try await waitForSessions(client) { table in
                table[volatile]?["received_seq"] == 5 && table[volatile]?["inbox"] == 0
                    && table[kept]?["received_seq"] == 5 && table[kept]?["inbox"] == 5
            }
            let reopenedVolatile = try await client.attach(session: volatile)
            let reopenedKept = try await client.attach(session: kept)
            #expect(reopenedVolatile.deliveredSeq == 5)
            #expect(reopenedKept.deliveredSeq == 0)

            var received: [UInt64: [UInt64]] = [:]
            while received[kept, default: []].count < 5, let event = try await events.next() {
                if case .message(let message) = event { received[message.session, default: []].append(message.seq) }
            }
            #expect(received[kept] == [1, 2, 3, 4, 5])
            #expect(received[volatile] == nil)

            // Attached, the non-durable session receives as usual.
            #expect(await daemon.server.execute(line: "push \(volatile) 1 16 0").hasPrefix("ok"))
            while received[volatile, default: []].isEmpty, let event = try await events.next() {
                if case .message(let message) = event { received[message.session, default: []].append(message.seq) }
            }
            #expect(received[volatile] == [6])
            await client.close()
        }
    }

    @Test func payloadAboveMaxPayload_failsThatSendOnly_theConnectionGoesOn() async throws {
        try await withRealDaemon { daemon in
            let socket = try RawIPCSocket(path: daemon.socketPath)
            socket.write(RawIPCSocket.hello())
            guard case .frame(let welcome) = socket.read(), welcome.op == 0x8001, let max = welcome.records[0x0004] else {
                Issue.record("no WELCOME")
                return
            }
            let maxPayload = Int(max[0]) << 24 | Int(max[1]) << 16 | Int(max[2]) << 8 | Int(max[3])
            socket.write(RawIPCSocket.frame(op: 0x0002, request: 2, records: [(0x0011, Array("sink".utf8))]))
            guard case .frame(let opened) = socket.readReply(), opened.op == 0x8002, let session = opened.records[0x0010] else {
                Issue.record("no OPENED")
                return
            }
            // One byte over MAX_PAYLOAD: the frame itself is within MAX_PAYLOAD + 64 KiB.
            let big = [UInt8](repeating: 0x61, count: maxPayload + 1)
            socket.write(RawIPCSocket.frame(op: 0x0005, request: 3, records: [(0x0010, session), (0x001A, big)]))
            guard case .frame(let refused) = socket.readReply() else {
                Issue.record("no answer to the oversized SEND")
                return
            }
            print("SEND of \(big.count) bytes (MAX_PAYLOAD \(maxPayload)): \(refused)")
            #expect(refused.op == 0xFFFF && refused.request == 3 && refused.code == 7)
            // Same connection: a message at the limit is accepted as seq 1.
            socket.write(RawIPCSocket.frame(op: 0x0005, request: 4, records: [(0x0010, session), (0x001A, Array(big.dropLast()))]))
            guard case .frame(let accepted) = socket.readReply() else {
                Issue.record("the connection did not go on")
                return
            }
            #expect(accepted.op == 0x8005 && accepted.request == 4)
            #expect(accepted.records[0x0015] == RawIPCSocket.be(UInt64(1)))
        }
    }

    @Test func watch_seesSessionsOpenedAttachedDetachedAndClosed() async throws {
        try await withRealDaemon { daemon in
            _ = try await daemon.waitForLink("connected")
            let watcher = try await IPCClient.connect(socketPath: daemon.socketPath, clientName: "watcher")
            let watched = try await watcher.watch()
            let client = try await IPCClient.connect(socketPath: daemon.socketPath, clientName: "actor")
            let session = try await client.open(service: "echo").session
            try await waitUntilOpen(client, [session])
            try await client.detach(session: session)
            _ = try await client.attach(session: session)
            try await client.close(session: session)

            var changes: [String] = []
            var iterator = watched.makeAsyncIterator()
            while !changes.contains("closed"), let event = try await iterator.next() {
                guard case .watch(let document) = event,
                      let object = try JSONSerialization.jsonObject(with: Data(document.json.utf8)) as? [String: Any],
                      object["event"] as? String == "session" else { continue }
                #expect((object["session"] as? NSNumber)?.uint64Value == session)
                #expect(object["service"] as? String == "echo")
                let change = object["change"] as? String ?? "?"
                changes.append(change == "state" ? "state:\(object["state"] as? String ?? "?")" : change)
            }
            print("watch: session events \(changes)")
            #expect(changes == ["opened", "state:open", "detached", "attached", "closed"])
            await client.close()
            await watcher.close()
        }
    }

    @Test func watch_seesTheHeartbeatIntervalOfANewLink() async throws {
        try await withRealDaemon { daemon in
            _ = try await daemon.waitForLink("connected")
            let watcher = try await IPCClient.connect(socketPath: daemon.socketPath, clientName: "watcher")
            var iterator = try await watcher.watch().makeAsyncIterator()
            try await watcher.reconnectLink()
            var heartbeat: [String: Any]?
            while heartbeat == nil, let event = try await iterator.next() {
                guard case .watch(let document) = event,
                      let object = try JSONSerialization.jsonObject(with: Data(document.json.utf8)) as? [String: Any],
                      object["event"] as? String == "heartbeat" else { continue }
                heartbeat = object
            }
            print("watch: \(heartbeat ?? [:])")
            // [heartbeat] min_seconds = 1, max_seconds = 2.
            #expect((heartbeat?["interval_s"] as? Double).map { $0 >= 1 && $0 <= 2 } == true)
            await watcher.close()
        }
    }

    @Test func metricsAndStatus_showQueueDepthsAndTheStoreSize() async throws {
        try await withRealDaemon { daemon in
            _ = try await daemon.waitForLink("connected")
            let client = try await IPCClient.connect(socketPath: daemon.socketPath, clientName: "metrics")
            let session = try await client.open(service: "sink").session
            try await waitUntilOpen(client, [session])
            try await client.detach(session: session)
            #expect(await daemon.server.execute(line: "push \(session) 3 100 0").hasPrefix("ok"))
            try await waitForSessions(client) { $0[session]?["received_seq"] == 3 && $0[session]?["inbox"] == 3 }

            let metrics = try JSONSerialization.jsonObject(with: Data(try await client.metrics().utf8)) as? [String: Any]
            let gauges = try #require(metrics?["gauges"] as? [String: Any])
            print("metrics gauges: \(gauges)")
            #expect(gauges["sessions"] as? Int == 1)
            #expect(gauges["inbox_messages"] as? Int == 3)
            #expect(gauges["outbox_messages"] as? Int == 0)
            // Nothing happens meanwhile, so the database and its log are as large as when the gauges were read.
            let database = try FileManager.default.attributesOfItem(atPath: daemon.directory + "/imagentd.sqlite3")[.size] as? Int
            #expect(gauges["store_database_bytes"] as? Int == database && (database ?? 0) > 0)
            let wal = try FileManager.default.attributesOfItem(atPath: daemon.directory + "/imagentd.sqlite3-wal")[.size] as? Int
            #expect(gauges["store_wal_bytes"] as? Int == wal && (wal ?? 0) > 0)
            #expect(gauges["outbox_bytes"] as? Int == 0)
            // A detached session's inbox stays in the store: nothing is read into memory for it.
            #expect(gauges["store_memory_bytes"] as? Int == 0)
            let counters = try #require(metrics?["counters"] as? [String: Any])
            #expect(counters["store_failures_total"] as? Int == 0)

            let status = try JSONSerialization.jsonObject(with: Data(try await client.status().utf8)) as? [String: Any]
            let store = try #require(status?["store"] as? [String: Any])
            #expect(store["db_bytes"] as? Int == database)
            #expect((store["path"] as? String)?.hasPrefix(daemon.directory) == true)
            #expect(store["memory_budget_bytes"] as? Int == 8 << 20)
            #expect(store["memory_bytes"] as? Int == 0)
            #expect(store["failures"] as? Int == 0)
            let sessions = try #require(status?["sessions"] as? [String: Any])
            #expect(sessions["outbox_bytes"] as? Int == 0)
            await client.close()
        }
    }

    // MARK: Helpers

    /// Polls SESSIONS until `done` holds for its table: session id → its integer fields.
    private func waitForSessions(_ client: IPCClient, within limit: Duration = .seconds(15),
                                 _ done: ([UInt64: [String: Int]]) -> Bool) async throws {
        var last = ""
        let matched: Void? = try await poll(within: limit) {
            last = try await client.sessions()
            let list = (try JSONSerialization.jsonObject(with: Data(last.utf8)) as? [String: Any])?["sessions"] as? [[String: Any]] ?? []
            var table: [UInt64: [String: Int]] = [:]
            for row in list {
                guard let id = (row["session"] as? NSNumber)?.uint64Value else { continue }
                table[id] = row.compactMapValues { $0 as? Int }
            }
            return done(table) ? () : nil
        }
        if matched == nil { Issue.record("SESSIONS never matched: \(last)") }
    }

    /// Polls SESSIONS until every one of `sessions` is open upstream.
    private func waitUntilOpen(_ client: IPCClient, _ sessions: [UInt64]) async throws {
        let opened: Void? = try await poll(within: .seconds(15)) {
            let json = try await client.sessions()
            let list = (try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])?["sessions"] as? [[String: Any]] ?? []
            let open = Set(list.filter { $0["state"] as? String == "open" }.compactMap { ($0["session"] as? NSNumber)?.uint64Value })
            return Set(sessions).isSubset(of: open) ? () : nil
        }
        if opened == nil { Issue.record("sessions \(sessions) never opened upstream") }
    }
}
