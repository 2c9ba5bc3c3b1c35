import Foundation
import IMAgentTestKit
import Testing

/// Issue 11, finding 6, against the real daemon: a server whose LOGIN_OK says
/// HEARTBEAT_MS = 0 must not make imagentd spin. The reference server
/// advertises 0 (`advertise-heartbeat 0`) while still judging idle links by
/// its real heartbeat; the daemon must PING about once a second at most and
/// stay under 5 % of a core.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct ServerTimingFloorTests {
    @Test func heartbeatMSZero_keepsTheDaemonUnderFivePercentOfACore() async throws {
        let setup = try await RealDaemon.prepare()
        #expect(await setup.server.execute(line: "advertise-heartbeat 0").hasPrefix("ok"))
        let daemon = try await RealDaemon.launch(setup)
        do {
            try await measure(daemon)
            await daemon.stop()
        } catch {
            await daemon.stop()
            throw error
        }
    }

    /// A LOGIN_FAIL OVERLOADED with RETRY_AFTER_MS of 46 days parks the daemon
    /// for 15 minutes at most, and `imagent reconnect` connects at once anyway.
    @Test func aHugeRetryAfter_isCapped_andImagentReconnectOverridesIt() async throws {
        try await withRealDaemon { daemon in
            _ = try await daemon.waitForLink("connected")
            #expect(await daemon.server.execute(line: "fail-login OVERLOADED 4000000000 1").hasPrefix("ok"))
            #expect(await daemon.server.execute(line: "drop").hasPrefix("ok"))
            // Dropped, then a LOGIN_FAIL OVERLOADED: waiting for the server's delay.
            var link: [String: Any] = [:]
            _ = try await poll(within: .seconds(15), every: .milliseconds(100)) { () -> Void? in
                let status = try await daemon.waitForLink("waiting")
                link = try #require(status["link"] as? [String: Any])
                return (link["last_error"] as? String)?.contains("OVERLOADED") == true ? () : nil
            }
            let error = try #require(link["last_error"] as? String)
            #expect(error.contains("LOGIN_FAIL OVERLOADED"), "\(link)")
            // "retry in 900.xxx seconds": the 46-day RETRY_AFTER_MS capped at 15 minutes (+ ≤ 1 s).
            #expect(error.contains("retry in 900.") || error.contains("retry in 901.0"), "\(error)")

            let started = ContinuousClock.now
            #expect(try await daemon.imagent(["reconnect"]).status == 0)
            _ = try await daemon.waitForLink("connected", within: .seconds(5))
            print("RETRY_AFTER_MS 4,000,000,000: parked for 15 min; imagent reconnect → connected in \(ContinuousClock.now - started)")
        }
    }

    private func measure(_ daemon: RealDaemon) async throws {
        let status = try await daemon.waitForLink("connected")
        let link = try #require(status["link"] as? [String: Any])
        #expect(link["heartbeat_s"] as? Double == 1, "HEARTBEAT_MS 0 counts as 1 s: \(link)")

        try await Task.sleep(for: .seconds(1))
        let pid = daemon.process.processIdentifier
        let framesBefore = try await Self.framesIn(daemon)
        let cpuBefore = try Self.cpuSeconds(pid)
        let wallBefore = ContinuousClock.now
        try await Task.sleep(for: .seconds(10))
        let cpu = try Self.cpuSeconds(pid) - cpuBefore
        let wall = (ContinuousClock.now - wallBefore).seconds
        let frames = try await Self.framesIn(daemon) - framesBefore
        let share = cpu / wall
        print("HEARTBEAT_MS 0: imagentd used \(String(format: "%.3f", cpu)) s of CPU in \(String(format: "%.1f", wall)) s "
            + "(\(String(format: "%.2f", share * 100)) % of a core); the server received \(frames) frames")
        #expect(share < 0.05, "under 5 % of a core")
        #expect(frames <= Int(wall) + 3, "about one PING a second, not a loop: \(frames) frames")
        #expect(frames >= 3, "and still PINGs")
        _ = try await daemon.waitForLink("connected", within: .seconds(2))
    }

    /// utime + stime of a process, from /proc/PID/stat.
    static func cpuSeconds(_ pid: Int32) throws -> Double {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        // The fields after the command name, which is in parentheses and may hold spaces.
        let rest = stat[stat.index(after: try #require(stat.lastIndex(of: ")")))...].split(separator: " ")
        let ticks = try #require(Double(rest[11])) + (try #require(Double(rest[12])))
        return ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    static func framesIn(_ daemon: RealDaemon) async throws -> Int {
        let reply = await daemon.server.execute(line: "stats")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(reply.dropFirst(3).utf8)) as? [String: Any])
        return try #require(json["frames_in"] as? Int)
    }
}

private extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
