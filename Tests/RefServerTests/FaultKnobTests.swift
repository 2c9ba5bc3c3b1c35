import IMLink
import NIOCore
import RefServer
import Testing

/// Every fault knob, turned through the admin Unix socket while agents are connected.
@Suite("Fault knobs over the admin socket")
struct FaultKnobTests {
    private static func withAdminServer<T: Sendable>(
        _ body: @escaping @Sendable (RefServer, @escaping @Sendable (String) async throws -> String) async throws -> T
    ) async throws -> T {
        try await withRefServer(configure: { configuration, environment in
            configuration.adminSocketPath = environment.adminSocket
            configuration.goawayGrace = .milliseconds(100)
            configuration.blackHoleLinger = .seconds(6)  // longer than the steps below take on a loaded machine
        }) { server, environment in
            try await body(server) { line in try await AdminClient.send(line, socket: environment.adminSocket) }
        }
    }

    @Test("goaway sends GOAWAY with code, retry and redirect to every connection, then closes them")
    func goaway_withRedirect_reachesEveryConnection() async throws {
        try await Self.withAdminServer { server, admin in
            let a = try await TestClient.connect(port: server.port)
            try await a.handshake(agentID: "agent-1")
            let b = try await TestClient.connect(port: server.port)
            try await b.hello(agentID: "agent-2")
            let reply = try await admin("goaway OVERLOADED 1500 redirect 127.0.0.1:4999")
            #expect(reply == "ok goaway OVERLOADED sent to 2 connections")
            let expected = Frame.goaway(Goaway(code: .overloaded, message: "requested by the goaway command",
                                               retryAfterMS: 1500, redirect: "127.0.0.1:4999"))
            #expect(try await a.expectFrame() == expected)
            #expect(try await b.expectFrame() == expected)
            try await a.expectClosed()
            try await b.expectClosed()
        }
    }

    @Test("fail-login makes the next COUNT logins fail with that code, then logins pass again")
    func failLogin_failsTheNextCountLogins() async throws {
        try await Self.withAdminServer { server, admin in
            #expect(try await admin("fail-login TOKEN_EXPIRED 250 2").hasPrefix("ok"))
            for _ in 0..<2 {
                let client = try await TestClient.connect(port: server.port)
                try await client.hello(agentID: "agent-3")
                #expect(try await client.login(agentID: "agent-3")
                    == .loginFail(LoginFail(code: .tokenExpired, message: "refused by the fail-login knob", retryAfterMS: 250)))
                try await client.expectClosed()
            }
            let client = try await TestClient.connect(port: server.port)
            try await client.handshake(agentID: "agent-3")
            await client.close()
        }
    }

    @Test("drop closes every connection at once")
    func drop_closesEveryConnection() async throws {
        try await Self.withAdminServer { server, admin in
            let client = try await TestClient.connect(port: server.port)
            try await client.handshake(agentID: "agent-4")
            #expect(try await admin("drop") == "ok dropped 1 connections")
            try await client.expectClosed()
        }
    }

    @Test("drop-after N closes a connection once it has received N more frames")
    func dropAfter_closesAfterNFrames() async throws {
        try await Self.withAdminServer { server, admin in
            let client = try await TestClient.connect(port: server.port)
            try await client.handshake(agentID: "agent-5")
            #expect(try await admin("drop-after 2") == "ok 1 connections close after 2 more frames")
            try await client.send(.ping(Ping(id: 1, timestampUS: 1)))
            #expect(try await client.expectFrame() == .pong(Ping(id: 1, timestampUS: 1)))
            try await client.send(.ping(Ping(id: 2, timestampUS: 2)))
            // The second frame is processed, then the connection goes.
            while let frame = try await client.next() {
                #expect(frame == .pong(Ping(id: 2, timestampUS: 2)))
            }
        }
    }

    @Test("stall stops reading: PINGs go unanswered until stall off")
    func stall_holdsReadsUntilOff() async throws {
        try await Self.withAdminServer { server, admin in
            let client = try await TestClient.connect(port: server.port)
            try await client.handshake(agentID: "agent-6")
            #expect(try await admin("stall on").hasPrefix("ok"))
            try await client.send(.ping(Ping(id: 9, timestampUS: 9)))
            #expect(try await client.isQuiet(for: .milliseconds(300)))
            #expect(try await admin("stall off").hasPrefix("ok"))
            #expect(try await client.expectFrame() == .pong(Ping(id: 9, timestampUS: 9)))
            await client.close()
        }
    }

    @Test("nat-timeout turns an idle connection into a black hole: nothing is answered, later it is closed silently")
    func natTimeout_blackHolesIdleConnections() async throws {
        try await Self.withAdminServer { server, admin in
            let client = try await TestClient.connect(port: server.port)
            try await client.handshake(agentID: "agent-7")
            #expect(try await admin("nat-timeout 0.2") == "ok nat-timeout 0.2 s")
            try await Task.sleep(for: .milliseconds(500))
            try await client.send(.ping(Ping(id: 3, timestampUS: 3)))
            #expect(try await client.isQuiet(for: .milliseconds(400)))
            #expect(client.channel.isActive)
            // A connection with traffic is left alone.
            #expect(try await admin("nat-timeout off") == "ok nat-timeout off")
            let fresh = try await TestClient.connect(port: server.port)
            try await fresh.handshake(agentID: "agent-8")
            try await fresh.send(.ping(Ping(id: 4, timestampUS: 4)))
            #expect(try await fresh.expectFrame() == .pong(Ping(id: 4, timestampUS: 4)))
            // The black hole's linger ends: the socket closes without a frame.
            try await client.expectClosed(timeout: .seconds(10), resetAllowed: true)
            await fresh.close()
        }
    }

    @Test("heartbeat changes HEARTBEAT_MS in future LOGIN_OKs")
    func heartbeat_appliesToFutureLogins() async throws {
        try await Self.withAdminServer { server, admin in
            #expect(try await admin("heartbeat 1234") == "ok heartbeat 1234 ms for future logins")
            let client = try await TestClient.connect(port: server.port)
            #expect(try await client.handshake(agentID: "agent-9").heartbeatMS == 1234)
            await client.close()
        }
    }

    @Test("a logged-in connection silent for 3 × HEARTBEAT_MS is closed")
    func silentConnection_isClosedAfterThreeHeartbeats() async throws {
        try await Self.withAdminServer { server, admin in
            #expect(try await admin("heartbeat 100").hasPrefix("ok"))
            let client = try await TestClient.connect(port: server.port)
            // Taken before LOGIN leaves, so it is no later than the server's last receipt.
            let lastSent = ContinuousClock.now
            try await client.handshake(agentID: "agent-10")
            try await client.expectClosed(timeout: .seconds(5))
            #expect(ContinuousClock.now - lastSent >= .milliseconds(300))
        }
    }

    @Test("push and stats: a stream on one session, reflected in the session's sequence numbers")
    func pushAndStats_reportSequenceNumbers() async throws {
        try await Self.withAdminServer { server, admin in
            let client = try await TestClient.connect(port: server.port)
            try await client.handshake(agentID: "agent-11")
            try await client.open(5, service: "sink")
            #expect(try await admin("push 5 3 8 0") == "ok pushing 3 messages of 8 bytes to 1 sessions")
            let frames = try await collect(client) { $0.dataSeqs.count == 3 }
            #expect(frames.dataSeqs == [1, 2, 3])
            try await client.send(.ack(Ack(session: 5, seq: 3)))
            try await client.sendData(5, seq: 1, "in")
            #expect(try await client.expectFrame() == .ack(Ack(session: 5, seq: 1)))
            let stats = try await admin("stats")
            #expect(stats.hasPrefix("ok {\"connections\":1,"))
            #expect(stats.contains(#"{"agent":"agent-11","session":5,"service":"sink","open":true,"in_last":1,"out_last":3,"out_acked":3,"out_sent":3}"#))
            #expect(try await admin("push 77 1 1 0").hasPrefix("error"))
            #expect(try await admin("frobnicate").hasPrefix("error unknown command"))
            await client.close()
        }
    }
}
