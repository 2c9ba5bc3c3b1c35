import IMLink
import NIOCore
import RefServer
import Testing

/// Reads frames until `done` says the collection is complete; every frame read is kept.
func collect(_ client: TestClient, timeout: TimeAmount? = nil, until done: ([Frame]) -> Bool) async throws -> [Frame] {
    var frames: [Frame] = []
    while !done(frames) {
        frames.append(try await client.expectFrame(timeout: timeout))
    }
    return frames
}

extension [Frame] {
    var dataSeqs: [UInt64] { compactMap { if case .data(let d) = $0 { d.seq } else { nil } } }
    var acks: [UInt64] { compactMap { if case .ack(let a) = $0 { a.seq } else { nil } } }
    var payloads: [String] { compactMap { if case .data(let d) = $0 { String(buffer: d.body) } else { nil } } }
}

@Suite("Sessions: echo, acknowledgement and resume")
struct ResumeTests {
    @Test("DATA is stored, ACKed and echoed; after a reconnect, OPEN resumes with no duplicate and no gap")
    func echoSurvivesReconnect_withoutDuplicateOrGap() async throws {
        try await withRefServer { server, _ in
            let first = try await TestClient.connect(port: server.port)
            let login = try await first.handshake(agentID: "agent-a")
            #expect(login.heartbeatMS == 30_000)
            #expect(login.serverTimeMS.map { $0 > 1_700_000_000_000 } == true)
            let opened = try await first.open(7, service: "echo")
            #expect(opened.lastAcked == 0)
            #expect(opened.window == 1024)

            try await first.sendData(7, seq: 1, "one")
            try await first.sendData(7, seq: 2, "two")
            try await first.sendData(7, seq: 3, "three")
            let frames = try await collect(first) { $0.acks.last == 3 && $0.dataSeqs.count == 3 }
            #expect(frames.dataSeqs == [1, 2, 3])
            #expect(frames.payloads == ["one", "two", "three"])
            #expect(frames.acks.allSatisfy { $0 <= 3 })
            // The agent durably stored only the first echo before the link broke.
            try await first.send(.ack(Ack(session: 7, seq: 1)))
            try await first.roundTrip()
            await first.close()

            let second = try await TestClient.connect(port: server.port)
            try await second.handshake(agentID: "agent-a")
            let resumed = try await second.open(7, service: "echo", resumeAfter: 1)
            #expect(resumed.lastAcked == 3)
            let resent = try await collect(second) { $0.dataSeqs.count == 2 }
            #expect(resent.dataSeqs == [2, 3])
            #expect(resent.payloads == ["two", "three"])

            // A resend of the last stored message is a duplicate; the next one is new.
            try await second.sendData(7, seq: 3, "three")
            try await second.sendData(7, seq: 4, "four")
            let more = try await collect(second) { $0.acks.last == 4 && $0.dataSeqs.count == 1 }
            #expect(more.dataSeqs == [4])
            #expect(more.payloads == ["four"])
            #expect(try await second.isQuiet(for: .milliseconds(200)))
            await second.close()
        }
    }

    @Test("a compressed DATA is echoed with its COMPRESSED flag and body unchanged")
    func compressedEcho_keepsFlag() async throws {
        try await withRefServer { server, _ in
            let client = try await TestClient.connect(port: server.port)
            try await client.handshake(agentID: "agent-z")
            try await client.open(1, service: "echo")
            let body = Deflate.deflate(ByteBuffer(string: String(repeating: "abc", count: 100)))
            try await client.send(.data(DataFrame(session: 1, seq: 1, compressed: true, body: body)))
            let frames = try await collect(client) { $0.dataSeqs.count == 1 && $0.acks.last == 1 }
            let frame = try #require(frames.first(where: { $0.type == .data }), "no DATA echoed")
            guard case .data(let echo) = frame else { Issue.record("expected DATA, got \(frame)"); return }
            #expect(echo.compressed)
            #expect(echo.body == body)
            await client.close()
        }
    }

    @Test("a duplicate DATA is discarded but acknowledged again")
    func duplicate_isReAcknowledged() async throws {
        try await withRefServer { server, _ in
            let client = try await TestClient.connect(port: server.port)
            try await client.handshake(agentID: "agent-b")
            try await client.open(3, service: "sink")
            try await client.sendData(3, seq: 1, "x")
            #expect(try await client.expectFrame() == .ack(Ack(session: 3, seq: 1)))
            try await client.sendData(3, seq: 1, "x")
            #expect(try await client.expectFrame() == .ack(Ack(session: 3, seq: 1)))
            let stats = await server.execute(.stats)
            #expect(stats.contains("\"messages_in\":1"))
            await client.close()
        }
    }

    @Test("a sequence gap is a fatal protocol error")
    func gap_closesWithProtocolError() async throws {
        try await withRefServer { server, _ in
            let client = try await TestClient.connect(port: server.port)
            try await client.handshake(agentID: "agent-c")
            try await client.open(3, service: "sink")
            try await client.sendData(3, seq: 2, "skips one")
            guard case .error(let error) = try await client.expectFrame() else {
                Issue.record("expected ERROR")
                return
            }
            #expect(error.session == 0)
            #expect(error.code == .protocolError)
            try await client.expectClosed()
        }
    }

    @Test("DATA on a session not open on this connection gets ERROR UNKNOWN_SESSION; the link stays up")
    func dataOnUnopenedSession_isUnknownSession() async throws {
        try await withRefServer { server, _ in
            let client = try await TestClient.connect(port: server.port)
            try await client.handshake(agentID: "agent-d")
            try await client.sendData(99, seq: 1, "nobody home")
            guard case .error(let error) = try await client.expectFrame() else {
                Issue.record("expected ERROR")
                return
            }
            #expect(error.session == 99)
            #expect(error.code == .unknownSession)
            try await client.send(.ping(Ping(id: 5, timestampUS: 77)))
            #expect(try await client.expectFrame() == .pong(Ping(id: 5, timestampUS: 77)))
            await client.close()
        }
    }

    @Test("CLOSE ends a session for good: a later OPEN gets OPEN_FAIL SESSION_CLOSED")
    func closedSession_cannotBeReopened() async throws {
        try await withRefServer { server, _ in
            let client = try await TestClient.connect(port: server.port)
            try await client.handshake(agentID: "agent-e")
            try await client.open(4, service: "echo")
            try await client.send(.close(Close(session: 4)))
            try await client.send(.open(Open(session: 4, service: "echo", resumeAfter: 0)))
            guard case .openFail(let failure) = try await client.expectFrame() else {
                Issue.record("expected OPEN_FAIL")
                return
            }
            #expect(failure.session == 4)
            #expect(failure.code == .sessionClosed)
            await client.close()
        }
    }

    @Test("OPEN of an unknown service gets OPEN_FAIL FORBIDDEN")
    func unknownService_isForbidden() async throws {
        try await withRefServer { server, _ in
            let client = try await TestClient.connect(port: server.port)
            try await client.handshake(agentID: "agent-f")
            try await client.send(.open(Open(session: 1, service: "nonesuch", resumeAfter: 0)))
            guard case .openFail(let failure) = try await client.expectFrame() else {
                Issue.record("expected OPEN_FAIL")
                return
            }
            #expect(failure.code == .forbidden)
            await client.close()
        }
    }

    @Test("WINDOW 0 pauses that session's pushes only; a wider WINDOW resumes them")
    func windowZero_pausesOnlyThatSession() async throws {
        try await withRefServer { server, _ in
            let client = try await TestClient.connect(port: server.port)
            try await client.handshake(agentID: "agent-g", features: [.flow])
            try await client.open(1, service: "push")
            try await client.open(2, service: "push")
            try await client.send(.window(WindowUpdate(session: 1, window: 0)))
            try await client.roundTrip()

            #expect(await server.execute(line: "push all 5 10 0").hasPrefix("ok"))
            let flowing = try await collect(client) { $0.dataSeqs.count == 5 }
            #expect(flowing.allSatisfy { $0.session == 2 })
            #expect(try await client.isQuiet(for: .milliseconds(300)))

            try await client.send(.window(WindowUpdate(session: 1, window: 3)))
            let resumed = try await collect(client) { $0.dataSeqs.count == 3 }
            #expect(resumed.allSatisfy { $0.session == 1 })
            #expect(resumed.dataSeqs == [1, 2, 3])
            #expect(try await client.isQuiet(for: .milliseconds(200)))
            try await client.send(.ack(Ack(session: 1, seq: 3)))
            let rest = try await collect(client) { $0.dataSeqs.count == 2 }
            #expect(rest.dataSeqs == [4, 5])
            await client.close()
        }
    }

    @Test("a push session created by OPEN receives the configured stream")
    func pushService_sendsConfiguredStream() async throws {
        try await withRefServer(configure: { configuration, _ in
            configuration.push = .init(count: 4, size: 20, rate: 200)
        }) { server, _ in
            let client = try await TestClient.connect(port: server.port)
            try await client.handshake(agentID: "agent-p", maxFrame: 4096)
            try await client.open(9, service: "push")
            let frames = try await collect(client) { $0.dataSeqs.count == 4 }
            #expect(frames.dataSeqs == [1, 2, 3, 4])
            #expect(frames.payloads.first == "push 9 #1 ..........")
            await client.close()
        }
    }
}
