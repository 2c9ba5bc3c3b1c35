import AgentIPC
import Foundation
import NIOCore
import Testing

/// A message the server cannot take brings the link down each time it arrives (the reference
/// server's `drop-on-data`): after imagentd(8)'s count of losses its session is quarantined, its
/// client hears why, STATUS and the log say so, and another session's messages flow throughout,
/// at the cost of at most that many reconnects.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct PoisonMessageTests {
    @Test func aMessageThatDropsTheLinkEveryTime_quarantinesItsSession_andTheOthersGoOn() async throws {
        try await withRealDaemon { daemon in
            _ = try await daemon.waitForLink("connected")
            let client = try await IPCClient.connect(socketPath: daemon.socketPath, clientName: "poison-test")
            var events = client.events.makeAsyncIterator()
            let echo = try await client.open(service: "echo").session
            let poison = try await client.open(service: "sink").session
            #expect(await daemon.server.execute(line: "drop-on-data \(poison)").hasPrefix("ok"))
            _ = try await client.send(session: poison, text: "the server cannot take this")

            // Echoes one at a time until the poison is quarantined, then three more.
            var quarantine: IPCMessage.SessionStateChange?
            var echoed: [String] = []
            var afterQuarantine = 0
            var slowest = Duration.zero
            var sent = 0
            while afterQuarantine < 3, sent < 40 {
                sent += 1
                let text = "echo \(sent)"
                let start = ContinuousClock.now
                _ = try await client.send(session: echo, text: text)
                wait: while let event = try await events.next() {
                    switch event {
                    case .message(let message) where message.session == echo:
                        try await client.ack(session: echo, seq: message.seq)
                        echoed.append(String(buffer: message.payload))
                        if String(buffer: message.payload) == text { break wait }
                    case .sessionState(let change) where change.session == poison && change.state == .failed:
                        quarantine = change
                    default:
                        continue
                    }
                }
                if quarantine != nil {
                    afterQuarantine += 1
                    slowest = max(slowest, ContinuousClock.now - start)
                }
            }
            let log = daemon.log
            let reason = try #require(quarantine, "no SESSION_STATE failed for the poison session\n\(log.suffix(3000))")
            #expect(reason.code == .upstreamRejected)
            #expect(reason.message?.contains("quarantined: the link was lost 3 times just after seq 1") == true, "\(reason)")
            #expect(echoed == (1...sent).map { "echo \($0)" }, "each echo once, in order")
            // Without the quarantine each echo would wait out another loss and reconnect; 10 s leaves
            // room for a loaded machine (6.4 s seen with the whole suite running beside it).
            #expect(slowest < .seconds(10), "after the quarantine each echo comes within 10 s: \(slowest)")

            let status = try JSONSerialization.jsonObject(with: Data(try await client.status().utf8)) as? [String: Any]
            let link = status?["link"] as? [String: Any]
            #expect(link?["state"] as? String == "connected")
            #expect((link?["reconnects"] as? Int ?? 99) <= 3, "at most the count of reconnects: \(String(describing: link))")
            let sessions = status?["sessions"] as? [String: Any]
            #expect(sessions?["failed"] as? Int == 1 && sessions?["quarantined_total"] as? Int == 1, "\(String(describing: sessions))")
            let failed = (sessions?["failed_sessions"] as? [[String: Any]])?.first
            #expect((failed?["session"] as? NSNumber)?.uint64Value == poison)
            #expect((failed?["reason"] as? String)?.hasPrefix("quarantined:") == true, "\(String(describing: failed))")
            #expect(log.contains("session \(poison) of uid \(getuid()) quarantined"), "\(log.suffix(3000))")

            // Nothing more of it is sent; SEND says why; its owner can close it.
            await #expect(throws: IPCClientError.self) { _ = try await client.send(session: poison, text: "again") }
            try await client.close(session: poison)
            await client.close()
        }
    }
}
