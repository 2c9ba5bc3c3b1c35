import AgentIPC
import Foundation
import NIOCore
import Testing

/// The Swift client against the fake daemon: handshake, every request,
/// events, errors, and the one error path on connection loss.
@Suite struct IPCClientTests {
    @Test func connectSaysHelloWithItsName_andKeepsTheWelcome() async throws {
        try await withFakeDaemon { daemon in
            let client = try await IPCClient.connect(socketPath: daemon.socketPath, clientName: "unit-test")
            #expect(client.welcome.daemonVersion == "0.9.0-fake")
            #expect(client.welcome.linkState == .connected)
            #expect(client.socketPath.source == .explicit)
            await client.close()
            let hello = try #require(daemon.received(.hello).first)
            #expect(hello.message == .hello(.init(ipcVersion: 1, clientName: "unit-test")))
            #expect(hello.request != 0)
        }
    }

    @Test func queriesReturnTheDaemonsJSON() async throws {
        try await withFakeDaemon { daemon in
            let client = try await IPCClient.connect(socketPath: daemon.socketPath, clientName: "t")
            #expect(try await client.status() == FakeDaemon.statusJSON)
            #expect(try await client.sessions() == FakeDaemon.sessionsJSON)
            #expect(try await client.metrics() == FakeDaemon.metricsJSON)
            // The round trip it measures is a real one, within the call.
            let started = ContinuousClock.now
            let roundTrip = try await client.ping()
            let call = ContinuousClock.now - started
            #expect(roundTrip > .zero && roundTrip <= call, "a round trip of \(roundTrip) in a call of \(call)")
            try await client.connectLink()
            try await client.disconnectLink()
            try await client.reconnectLink()
            try await client.reload()
            await client.close()
            let ops = daemon.received.map(\.frame.message.op)
            #expect(ops == [.hello, .status, .sessions, .metrics, .ping, .connect, .disconnect, .reconnect, .reload])
        }
    }

    @Test func openCreatesASession_andSendReturnsTheAcceptedSeqs() async throws {
        try await withFakeDaemon { daemon in
            let client = try await IPCClient.connect(socketPath: daemon.socketPath, clientName: "t")
            let opened = try await client.open(service: "echo", priority: .high, durable: false)
            #expect(opened.session == 42)
            #expect(opened.sessionState == .pending)
            #expect(try await client.send(session: 42, text: "one") == 1)
            #expect(try await client.send(session: 42, payload: ByteBuffer(bytes: [0, 255]), ttl: .milliseconds(1500)) == 2)
            await client.close()

            #expect(daemon.received(.open).first?.message
                == .open(.init(service: "echo", priority: .high, durable: false)))
            let sends = daemon.received(.send).map(\.message)
            #expect(sends == [
                .send(.init(session: 42, payload: ByteBuffer(string: "one"))),
                .send(.init(session: 42, payload: ByteBuffer(bytes: [0, 255]), ttlMS: 1500)),
            ])
        }
    }

    @Test func attachDeliversMessagesAsEvents_andAckGoesOutWithRequestZero() async throws {
        try await withFakeDaemon { daemon in
            let client = try await IPCClient.connect(socketPath: daemon.socketPath, clientName: "t")
            let opened = try await client.attach(session: 7)
            #expect(opened.session == 7)
            var payloads: [String] = []
            for try await event in client.events {
                guard case .message(let message) = event else { continue }
                payloads.append(String(buffer: message.payload))
                try await client.ack(session: 7, seq: message.seq)
                if payloads.count == 2 { break }
            }
            #expect(payloads == ["hello", "world"])
            // ACK has no reply; a PING round trip proves the daemon read both.
            _ = try await client.ping()
            await client.close()
            let acks = daemon.received(.ack)
            #expect(acks.map(\.request) == [0, 0])
            #expect(acks.map(\.message) == [.ack(.init(session: 7, seq: 1)), .ack(.init(session: 7, seq: 2))])
        }
    }

    @Test func aBacklogOfUnreadEvents_neverBlocksAReply_andLosesNothing() async throws {
        // More MESSAGE events than the client buffers before it stops reading
        // (IPCEvents.highWatermark): the STATUS reply behind them must still
        // arrive, and every message must come out once, in order.
        let backlog = 3 * 1024
        var script = FakeDaemon.Script()
        script.inbound = [7: (1...backlog).map { Array("m\($0)".utf8) }]
        try await withFakeDaemon(script) { daemon in
            let client = try await IPCClient.connect(socketPath: daemon.socketPath, clientName: "t")
            _ = try await client.attach(session: 7)
            try await Task.sleep(for: .milliseconds(100))
            #expect(try await client.status() == FakeDaemon.statusJSON)
            var seqs: [UInt64] = []
            for try await event in client.events {
                guard case .message(let message) = event else { continue }
                #expect(String(buffer: message.payload) == "m\(message.seq)")
                seqs.append(message.seq)
                if seqs.count == backlog { break }
            }
            #expect(seqs == Array(1...UInt64(backlog)))
            await client.close()
        }
    }

    @Test func watchDeliversTheDaemonsEvents() async throws {
        try await withFakeDaemon { daemon in
            let client = try await IPCClient.connect(socketPath: daemon.socketPath, clientName: "t")
            var documents: [String] = []
            for try await event in try await client.watch() {
                if case .watch(let document) = event { documents.append(document.json) }
                if documents.count == FakeDaemon.watchEventsJSON.count { break }
            }
            #expect(documents == FakeDaemon.watchEventsJSON)
            await client.close()
        }
    }

    @Test func startedSends_reachTheDaemonInTheOrderStarted_andTheirSeqsFollowIt() async throws {
        try await withFakeDaemon { daemon in
            let client = try await IPCClient.connect(socketPath: daemon.socketPath, clientName: "t")
            let pending = try (1...200).map { try client.startSend(session: 7, payload: ByteBuffer(string: "m\($0)")) }
            var seqs: [UInt64] = []
            for send in pending { seqs.append(try await send.accepted()) }
            #expect(seqs == Array(1...200))
            let payloads = daemon.received(.send).compactMap { received -> String? in
                guard case .send(let send) = received.message else { return nil }
                return String(buffer: send.payload)
            }
            #expect(payloads == (1...200).map { "m\($0)" })
            // A refusal comes back from accepted(), as from send().
            await #expect(throws: IPCClientError.refused(op: .send, code: .unknownSession, message: "no such session")) {
                try await client.startSend(session: 999, payload: ByteBuffer(string: "x")).accepted()
            }
            await client.close()
        }
    }

    @Test func anErrorReplyIsThrownWithItsCodeAndMessage() async throws {
        var script = FakeDaemon.Script()
        script.refusals[.reload] = .init(code: .permissionDenied, message: "admin only")
        try await withFakeDaemon(script) { daemon in
            let client = try await IPCClient.connect(socketPath: daemon.socketPath, clientName: "t")
            await #expect(throws: IPCClientError.refused(op: .reload, code: .permissionDenied, message: "admin only")) {
                try await client.reload()
            }
            await #expect(throws: IPCClientError.refused(op: .close, code: .unknownSession, message: "no such session")) {
                try await client.close(session: 999)
            }
            // The connection is still good after a refusal.
            _ = try await client.ping()
            await client.close()
        }
    }

    @Test func concurrentRequestsGetTheirOwnReplies() async throws {
        try await withFakeDaemon { daemon in
            let client = try await IPCClient.connect(socketPath: daemon.socketPath, clientName: "t")
            let seqs = try await withThrowingTaskGroup(of: UInt64.self) { group in
                for index in 0..<50 {
                    group.addTask { try await client.send(session: 7, text: "m\(index)") }
                    group.addTask { _ = try await client.status(); return 0 }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(Set(seqs.filter { $0 != 0 }) == Set(1...50))
            await client.close()
            let ids = daemon.received.map(\.frame.request)
            #expect(Set(ids).count == ids.count, "every request carries its own id")
        }
    }

    @Test func aRequestWithoutAnswer_timesOut_andTheConnectionStaysUsable() async throws {
        var script = FakeDaemon.Script()
        script.unanswered = [.metrics]
        try await withFakeDaemon(script) { daemon in
            // Only this request has the short limit, so a loaded machine
            // cannot make the handshake or the next request time out too.
            let client = try await IPCClient.connect(socketPath: daemon.socketPath, clientName: "t")
            await #expect(throws: IPCClientError.timedOut(op: .metrics, after: .milliseconds(300))) {
                try await client.request(.metrics(.init()), timeout: .milliseconds(300))
            }
            #expect(try await client.status() == FakeDaemon.statusJSON)
            await client.close()
        }
    }

    @Test func connectionLoss_failsThePendingRequest_theEvents_andEveryLaterRequest() async throws {
        var script = FakeDaemon.Script()
        script.disconnectOn = [.reconnect]
        try await withFakeDaemon(script) { daemon in
            let client = try await IPCClient.connect(socketPath: daemon.socketPath, clientName: "t")
            let lost = IPCClientError.connectionLost(reason: "it closed the connection")
            let events = Task {
                do {
                    for try await _ in client.events {}
                    return "finished"
                } catch {
                    return "\(error)"
                }
            }
            await #expect(throws: lost) { try await client.reconnectLink() }
            await #expect(throws: lost) { try await client.status() }
            #expect(await events.value == lost.description)
            await client.close()
        }
    }

    @Test func closeEndsTheEventsWithoutError_andLaterRequestsFailAsClosed() async throws {
        try await withFakeDaemon { daemon in
            let client = try await IPCClient.connect(socketPath: daemon.socketPath, clientName: "t")
            let events = Task {
                var count = 0
                for try await _ in client.events { count += 1 }
                return count
            }
            await client.close()
            #expect(try await events.value == 0)
            await #expect(throws: IPCClientError.closed) { try await client.status() }
        }
    }

    @Test func aPayloadAboveMaxPayload_isRefusedBeforeItIsSent() async throws {
        var script = FakeDaemon.Script()
        script.maxPayload = 16
        try await withFakeDaemon(script) { daemon in
            let client = try await IPCClient.connect(socketPath: daemon.socketPath, clientName: "t")
            await #expect(throws: IPCClientError.payloadTooLarge(size: 17, limit: 16)) {
                try await client.send(session: 7, payload: ByteBuffer(repeating: 1, count: 17))
            }
            #expect(try await client.send(session: 7, payload: ByteBuffer(repeating: 1, count: 16)) == 1)
            await client.close()
            #expect(daemon.received(.send).count == 1)
        }
    }

    /// A peer at the socket that announces 4 GiB cannot make the client send or buffer more than
    /// any imagentd allows: MAX_PAYLOAD counts as 16 MiB, and a frame above 16 MiB + 64 KiB ends
    /// the connection from its first four bytes.
    @Test(.timeLimit(.minutes(1))) func aWelcomeAboveTheCeiling_countsAsTheCeiling_bothWays() async throws {
        let ceiling = IPCClient.maxPayloadCeiling
        #expect(ceiling == 16 << 20)
        var script = FakeDaemon.Script()
        script.maxPayload = .max
        script.inbound = [7: [[UInt8](repeating: 0x5A, count: Int(ceiling) + 65_536 + 1)]]
        try await withFakeDaemon(script) { daemon in
            let client = try await IPCClient.connect(socketPath: daemon.socketPath, clientName: "t")
            #expect(client.welcome.maxPayload == ceiling)
            await #expect(throws: IPCClientError.payloadTooLarge(size: Int(ceiling) + 1, limit: ceiling)) {
                try await client.send(session: 7, payload: ByteBuffer(repeating: 1, count: Int(ceiling) + 1))
            }
            _ = try await client.attach(session: 7)
            let error = await #expect(throws: IPCClientError.self) {
                for try await _ in client.events {}
            }
            guard case .protocolViolation(let detail) = error else {
                Issue.record("expected a protocol violation, got \(String(describing: error))")
                return
            }
            #expect(detail.contains("above the limit of \(UInt64(ceiling) + 65_536) bytes"))
            await client.close()
            #expect(daemon.received(.send).isEmpty)
        }
    }

    @Test func aWelcomeWithMaxPayload0_isRefusedAtConnect() async throws {
        var script = FakeDaemon.Script()
        script.maxPayload = 0
        try await withFakeDaemon(script) { daemon in
            let error = await #expect(throws: IPCClientError.self) {
                try await IPCClient.connect(socketPath: daemon.socketPath, clientName: "t")
            }
            guard case .protocolViolation(let detail) = error else {
                Issue.record("expected a protocol violation, got \(String(describing: error))")
                return
            }
            #expect(detail.contains("MAX_PAYLOAD of 0"))
        }
    }

    @Test func noSocket_saysTheDaemonIsNotRunning_andHowToStartIt() async throws {
        let path = try FakeDaemon.makeTemporaryDirectory() + "/absent.sock"
        let error = await #expect(throws: IPCClientError.self) {
            try await IPCClient.connect(socketPath: path, clientName: "t")
        }
        #expect(error == .daemonNotRunning(socketPath: path, alsoTried: []))
        #expect(error?.description.contains("systemctl start imagentd") == true)
    }

    @Test func aFileNobodyListensOn_isReportedAsLeftOver() async throws {
        // connect(2) answers ECONNREFUSED for a socket file whose daemon died
        // and for any other file nobody listens on alike.
        let stale = try FakeDaemon.makeTemporaryDirectory() + "/stale.sock"
        #expect(FileManager.default.createFile(atPath: stale, contents: nil))
        let error = await #expect(throws: IPCClientError.self) {
            try await IPCClient.connect(socketPath: stale, clientName: "t")
        }
        #expect(error == .daemonNotListening(socketPath: stale))
    }
}
