import IMLink
import NIOCore
import RefServer
import Testing

@Suite("Persistence across server restarts")
struct PersistenceTests {
    @Test("with --state, a new server on the same file resumes without loss or duplicate")
    func restartOnSameStateFile_resumesExactly() async throws {
        let environment = try TestEnvironment.make()
        defer { environment.remove() }
        let configure: @Sendable (inout RefServerConfiguration, TestEnvironment) -> Void = { configuration, environment in
            configuration.statePath = environment.statePath
        }

        try await withRefServer(environment: environment, configure: configure) { server, _ in
            let client = try await TestClient.connect(port: server.port)
            try await client.handshake(agentID: "agent-p")
            try await client.open(11, service: "echo")
            try await client.open(12, service: "sink")
            try await client.open(13, service: "echo")
            for seq in 1...3 as ClosedRange<UInt64> {
                try await client.sendData(11, seq: seq, "m\(seq)")
            }
            try await client.sendData(12, seq: 1, "sunk")
            try await client.send(.close(Close(session: 13)))
            let frames = try await collect(client) {
                $0.dataSeqs.count == 3 && $0.contains(.ack(Ack(session: 11, seq: 3))) && $0.contains(.ack(Ack(session: 12, seq: 1)))
            }
            #expect(frames.dataSeqs == [1, 2, 3])
            // Only the first echo reached the agent's store before the server went down.
            try await client.send(.ack(Ack(session: 11, seq: 1)))
            try await client.roundTrip()
        }

        try await withRefServer(environment: environment, configure: configure) { server, _ in
            let client = try await TestClient.connect(port: server.port)
            try await client.handshake(agentID: "agent-p")
            #expect(try await client.open(12, service: "sink").lastAcked == 1)
            let resumed = try await client.open(11, service: "echo", resumeAfter: 1)
            #expect(resumed.lastAcked == 3)
            let resent = try await collect(client) { $0.dataSeqs.count == 2 }
            #expect(resent.dataSeqs == [2, 3])
            #expect(resent.payloads == ["m2", "m3"])

            try await client.sendData(11, seq: 3, "m3")
            try await client.sendData(11, seq: 4, "m4")
            let next = try await collect(client) { $0.dataSeqs.count == 1 && $0.acks.last == 4 }
            #expect(next.dataSeqs == [4])
            #expect(next.payloads == ["m4"])

            try await client.send(.open(Open(session: 13, service: "echo", resumeAfter: 0)))
            guard case .openFail(let failure) = try await client.expectFrame() else {
                Issue.record("a session closed before the restart was reopened")
                return
            }
            #expect(failure.code == .sessionClosed)
            await client.close()
        }
    }
}
