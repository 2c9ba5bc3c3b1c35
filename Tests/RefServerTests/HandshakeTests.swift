import Foundation
import IMLink
import NIOCore
import RefServer
import Testing

@Suite("Handshake and link phases")
struct HandshakeTests {
    @Test("HELLO_OK offers the intersection of features and the server's MAX_FRAME")
    func hello_negotiatesFeaturesAndMaxFrame() async throws {
        try await withRefServer(configure: { configuration, _ in configuration.maxFrame = 65536 }) { server, _ in
            let client = try await TestClient.connect(port: server.port)
            let reply = try await client.hello(agentID: "agent-h", features: Features(rawValue: 0b1110))
            #expect(reply == .helloOK(HelloOK(version: 1, features: .flow, maxFrame: 65536)))
            await client.close()
        }
    }

    @Test("a bad token gets LOGIN_FAIL TOKEN_INVALID and the connection closes")
    func badToken_isRefused() async throws {
        try await withRefServer { server, _ in
            let client = try await TestClient.connect(port: server.port)
            try await client.hello(agentID: "agent-i")
            let reply = try await client.login(agentID: "agent-i", token: "wrong")
            guard case .loginFail(let failure) = reply else {
                Issue.record("expected LOGIN_FAIL, got \(reply)")
                return
            }
            #expect(failure.code == .tokenInvalid)
            try await client.expectClosed()
        }
    }

    @Test("the token file is re-read at every LOGIN, so tokens rotate while the server runs")
    func tokenRotation_takesEffectAtNextLogin() async throws {
        try await withRefServer { server, environment in
            try environment.writeTokens(["fresh"])
            let old = try await TestClient.connect(port: server.port)
            try await old.hello(agentID: "agent-j")
            guard case .loginFail = try await old.login(agentID: "agent-j") else {
                Issue.record("the rotated-out token was accepted")
                return
            }
            let new = try await TestClient.connect(port: server.port)
            try await new.hello(agentID: "agent-j")
            guard case .loginOK = try await new.login(agentID: "agent-j", token: "fresh") else {
                Issue.record("the new token was refused")
                return
            }
            await new.close()
        }
    }

    @Test("a missing token file refuses every LOGIN instead of failing open")
    func missingTokenFile_refusesLogin() async throws {
        try await withRefServer { server, environment in
            try FileManager.default.removeItem(atPath: environment.tokenFile)
            let client = try await TestClient.connect(port: server.port)
            try await client.hello(agentID: "agent-o")
            guard case .loginFail(let failure) = try await client.login(agentID: "agent-o") else {
                Issue.record("expected LOGIN_FAIL")
                return
            }
            #expect(failure.code == .tokenInvalid)
            try await client.expectClosed()
        }
    }

    @Test("a HELLO without version 1 gets ERROR VERSION_UNSUPPORTED and the connection closes")
    func versionMismatch_isUnsupported() async throws {
        try await withRefServer { server, _ in
            let client = try await TestClient.connect(port: server.port)
            let reply = try await client.hello(agentID: "agent-k", versionMin: 2, versionMax: 3)
            guard case .error(let error) = reply else {
                Issue.record("expected ERROR, got \(reply)")
                return
            }
            #expect(error.code == .versionUnsupported)
            try await client.expectClosed()
        }
    }

    @Test("DATA before LOGIN_OK is a protocol error")
    func dataBeforeLogin_isProtocolError() async throws {
        try await withRefServer { server, _ in
            let client = try await TestClient.connect(port: server.port)
            try await client.hello(agentID: "agent-l")
            try await client.sendData(1, seq: 1, "too early")
            guard case .error(let error) = try await client.expectFrame() else {
                Issue.record("expected ERROR")
                return
            }
            #expect(error.code == .protocolError)
            try await client.expectClosed()
        }
    }

    @Test("PING is answered in every phase, even before HELLO")
    func ping_isAnsweredBeforeHello() async throws {
        try await withRefServer { server, _ in
            let client = try await TestClient.connect(port: server.port)
            try await client.send(.ping(Ping(id: 42, timestampUS: 123_456)))
            #expect(try await client.expectFrame() == .pong(Ping(id: 42, timestampUS: 123_456)))
            await client.close()
        }
    }

    @Test("garbage bytes get ERROR PROTOCOL and a close")
    func wrongMagic_isProtocolError() async throws {
        try await withRefServer { server, _ in
            let client = try await TestClient.connect(port: server.port)
            try await client.sendRaw(ByteBuffer(repeating: 0x41, count: 64))
            guard case .error(let error) = try await client.expectFrame() else {
                Issue.record("expected ERROR")
                return
            }
            #expect(error.code == .protocolError)
            try await client.expectClosed()
        }
    }

    @Test("a body above the announced MAX_FRAME gets ERROR FRAME_TOO_LARGE")
    func oversizedFrame_isRefused() async throws {
        try await withRefServer(configure: { configuration, _ in configuration.maxFrame = 4096 }) { server, _ in
            let client = try await TestClient.connect(port: server.port)
            try await client.handshake(agentID: "agent-m")
            try await client.open(1, service: "sink")
            try await client.send(.data(DataFrame(session: 1, seq: 1, body: ByteBuffer(repeating: 1, count: 5000))))
            guard case .error(let error) = try await client.expectFrame() else {
                Issue.record("expected ERROR")
                return
            }
            #expect(error.code == .frameTooLarge)
            try await client.expectClosed()
        }
    }

    @Test("a second login with the same AGENT_ID replaces the older connection")
    func secondLogin_replacesOlderConnection() async throws {
        try await withRefServer { server, _ in
            let older = try await TestClient.connect(port: server.port)
            try await older.handshake(agentID: "agent-n")
            try await older.open(1, service: "echo")
            let newer = try await TestClient.connect(port: server.port)
            try await newer.handshake(agentID: "agent-n")
            try await older.expectClosed()
            // The session waits for the newer connection's OPEN.
            try await newer.sendData(1, seq: 1, "hi")
            guard case .error(let error) = try await newer.expectFrame() else {
                Issue.record("expected ERROR UNKNOWN_SESSION")
                return
            }
            #expect(error.code == .unknownSession)
            try await newer.open(1, service: "echo")
            await newer.close()
        }
    }
}
