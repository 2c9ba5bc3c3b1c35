import AgentIPC
import Foundation
import NIOCore
import Testing

/// Disk bounds through the real daemon (issue 10): a SEND past a byte limit gets
/// QUEUE_FULL naming the limit, nothing accepted is dropped, and STATUS shows the
/// queue's bytes.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct StoreBoundsTests {
    @Test func aSendPastTheSessionByteLimit_isRefusedNamingIt_andEverythingAcceptedArrives() async throws {
        try await withRealDaemon(extraConfig: "[limits]\noutbox_bytes = 40000") { daemon in
            _ = try await daemon.waitForLink("connected")
            let client = try await IPCClient.connect(socketPath: daemon.socketPath, clientName: "bounds")
            let session = try await client.open(service: "echo").session
            var events = client.events.makeAsyncIterator()
            try await client.disconnectLink()
            _ = try await daemon.waitForLink("stopped")

            let payload = ByteBuffer(repeating: 0x61, count: 10_000)
            for seq in 1...4 { #expect(try await client.send(session: session, payload: payload) == UInt64(seq)) }
            do {
                _ = try await client.send(session: session, payload: payload)
                Issue.record("a fifth 10,000-byte SEND fit in outbox_bytes = 40000")
            } catch IPCClientError.refused(_, let code, let message) {
                #expect(code == .queueFull)
                #expect(message?.contains("outbox_bytes = 40000") == true, "\(message ?? "")")
            }
            let status = try JSONSerialization.jsonObject(with: Data(try await client.status().utf8)) as? [String: Any]
            let sessions = try #require(status?["sessions"] as? [String: Any])
            #expect(sessions["outbox_bytes"] as? Int == 40_000)

            // The link comes back: the four accepted messages echo back, none lost.
            try await client.connectLink()
            var echoes = 0
            while echoes < 4, let event = try await events.next() {
                if case .message(let message) = event {
                    echoes += 1
                    try await client.ack(session: session, seq: message.seq)
                }
            }
            print("store bounds: QUEUE_FULL past outbox_bytes, then \(echoes) echoes after the link came back")
            #expect(echoes == 4)
            await client.close()
        }
    }
}
