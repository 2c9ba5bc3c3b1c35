import Foundation
import Testing

/// Exactly-once through the real daemon while it is `kill -9`ed and
/// restarted and while the link is cut: every message sent is echoed back
/// once, in order, with the right payload.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct ExactlyOnceTests {
    @Test func killNineAndLinkDrops_loseNothing_duplicateNothing() async throws {
        var daemon = try await RealDaemon.start()
        do {
            try await run(&daemon)
        } catch {
            await daemon.stop()
            throw error
        }
        await daemon.stop()
    }

    private func run(_ daemon: inout RealDaemon) async throws {
        _ = try await daemon.waitForLink("connected")
        let opened = try await daemon.imagent(["open", "echo", "--json"])
        let session = try #require(((try JSONSerialization.jsonObject(with: Data(opened.stdout.utf8)) as? [String: Any])?["session"] as? NSNumber)?.uint64Value)

        // 1. 300 messages accepted (so stored), then kill -9 before their echoes can all be delivered.
        let first = try await daemon.imagent(["send", "\(session)", "--lines"], stdin: lines(1...300))
        #expect(first.status == 0, "\(first.stderr)")
        daemon.signal(SIGKILL)
        _ = await daemon.waitForExit(within: .seconds(5))
        daemon = try await daemon.restarted()
        _ = try await daemon.waitForLink("connected")

        // 2. The link is cut while 300 more go out: the server closes it on the 150th frame it
        //    receives from now on, so the cut falls inside the stream whatever the timing.
        let before = try await reconnects(daemon)
        #expect(await daemon.server.execute(line: "drop-after 150").hasPrefix("ok"))
        let second = try await daemon.imagent(["send", "\(session)", "--lines"], stdin: lines(301...600))
        #expect(second.status == 0, "\(second.stderr)")
        // Every DATA reaches the server in the end, so the cut happens; wait for the link to come back.
        var after = try await reconnects(daemon)
        let deadline = ContinuousClock.now + .seconds(15)
        while after == before, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(100))
            after = try await reconnects(daemon)
        }
        #expect(after > before, "the link was never cut (reconnects \(before) → \(after))")

        // 3. Read 200 (acknowledging them), kill -9 again, read the rest after the restart.
        var received = try await listen(daemon, session, count: 200, after: 0)
        daemon.signal(SIGKILL)
        _ = await daemon.waitForExit(within: .seconds(5))
        daemon = try await daemon.restarted()
        received += try await listen(daemon, session, count: 400, after: received.last?.seq ?? 0)

        #expect(received.map(\.seq) == Array(1...600), "seqs out of order, missing or duplicated")
        #expect(received.allSatisfy { $0.text == "m\($0.seq)" }, "a payload arrived under the wrong seq")
        print("exactly-once: 600 sent, \(received.count) received, 0 lost, 0 duplicated, across 2 kill -9 and 1 link drop")
    }

    private func reconnects(_ daemon: RealDaemon) async throws -> Int {
        let status = try await daemon.waitForLink("connected")
        let link = try #require(status["link"] as? [String: Any], "no link in \(status)")
        return try #require((link["reconnects"] as? NSNumber)?.intValue, "no reconnects in \(status)")
    }

    private func lines(_ range: ClosedRange<Int>) -> String {
        range.map { "m\($0)\n" }.joined()
    }

    /// Listens until `count` messages after `after` arrived; a client remembers the last
    /// seq it processed, so redelivered older ones (their ACK lost in the kill) are skipped.
    private func listen(_ daemon: RealDaemon, _ session: UInt64, count: Int, after: UInt64) async throws -> [(seq: UInt64, text: String)] {
        let result = try await daemon.imagent(["--timeout", "30", "listen", "\(session)", "--count", "\(count)",
                                               "--from-seq", "\(after + 1)", "--json"])
        #expect(result.status == 0, "\(result.stderr)\n\(daemon.log.suffix(3000))")
        return result.stdoutLines.compactMap { line in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  let seq = (object["seq"] as? NSNumber)?.uint64Value, let text = object["text"] as? String else { return nil }
            return (seq, text)
        }
    }
}
