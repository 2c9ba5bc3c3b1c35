import AgentIPC
import Foundation
import IMAgentTestKit
import RefServer
import Testing

/// An idle `imagentd` (link up, one session open, a client attached, nothing
/// to do) wakes no thread but its event loop, and that one only for the
/// heartbeat: counted thread by thread in `voluntary_ctxt_switches` over 30 s,
/// so the verdict is a count of wake-ups, whatever the load of the machine.
///
/// The binary measured is `$IMAGENT_RELEASE_BIN_DIR/imagentd` when that is set
/// (scripts/test sets it to the packaged build: release, Swift runtime linked
/// statically), otherwise the debug `imagentd` beside this test, which is
/// measured all the same. Only the release build can show a libdispatch
/// worker pool, the once-a-second wake-up this test exists for.
@Suite(.timeLimit(.minutes(2)))
struct IdleWakeupTests {
    static let window: Duration = .seconds(30)
    static let warmUp: Duration = .seconds(5)

    /// Per PING, the event loop wakes at most three times: the timer that sends it, the PONG's
    /// read, and the timer that finds the interval not yet over (it re-arms from the last traffic).
    static let wakeUpsPerPing = 3

    static var binary: String {
        if let directory = ProcessInfo.processInfo.environment["IMAGENT_RELEASE_BIN_DIR"], !directory.isEmpty {
            return directory + "/imagentd"
        }
        print("IdleWakeupTests: IMAGENT_RELEASE_BIN_DIR is unset; measuring the debug imagentd, which cannot show "
            + "libdispatch's pool monitor (scripts/test measures the release build)")
        return BuiltPrograms.daemon
    }

    @Test func anIdleDaemonWakesOnlyItsEventLoop_onlyForTheHeartbeat() async throws {
        let binary = Self.binary
        #expect(access(binary, X_OK) == 0, "\(binary) is not built")
        guard access(binary, X_OK) == 0 else { return }

        // HEARTBEAT_MS above the daemon's own ceiling: the packaged interval (15 s, then longer) is the daemon's.
        let setup = try await RealDaemon.prepare(.referenceServer { $0.heartbeatMS = 300_000; $0.statePath = nil }, token: "idle-token") { config in
            config.agentID = "idle-wakeups"
            config.reconnectCapMS = nil  // the packaged heartbeat and reconnect timing
        }
        let measured: (threads: [ThreadSwitches.Thread], pings: Int) = try await withRealDaemon(setup, RealDaemon.Start(binary: binary)) { daemon in
            let client = try await IPCClient.connect(socketPath: daemon.socketPath, clientName: "idle-wakeups")
            do {
                let measured = try await measureIdle(daemon: daemon.handle, client: client, server: daemon.server)
                await client.close()
                return measured
            } catch {
                await client.close()
                throw error
            }
        }
        let (threads, pings) = measured
        let table = threads.map { "\($0.name) (\($0.tid)): \($0.voluntary) voluntary, \($0.nonvoluntary) involuntary" }
            .joined(separator: "\n")
        print("IdleWakeupTests: \(binary), \(pings) frames to the server in \(Self.window):\n\(table)")
        // The threads imagentd(8) THREADS names, with [network] watch off: two of the three TP-#0.
        let names = threads.map(\.name).sorted()
        #expect(names == ["-qos.overcommit", "NIO-SGLTN-1-#1", "TP-#0", "TP-#0", "imagentd"], "threads:\n\(table)")
        let eventLoops = threads.filter { $0.name.hasPrefix("NIO-") }
        #expect(eventLoops.count == 1, "one event loop thread, not \(eventLoops.count):\n\(table)")
        for thread in threads where !thread.name.hasPrefix("NIO-") {
            #expect(thread.voluntary == 0, "thread \(thread.name) woke \(thread.voluntary) times while idle:\n\(table)")
        }
        // The window may cut one PING's wake-ups in two: one PING more than the server counted is allowed.
        let allowed = Self.wakeUpsPerPing * (pings + 1)
        for loop in eventLoops {
            #expect(loop.voluntary <= allowed, "the event loop woke \(loop.voluntary) times for \(pings) PINGs:\n\(table)")
        }
    }

    /// Opens a session and uses it once, lets the daemon settle, then counts every thread's
    /// switches and the frames the server receives over `window`.
    private func measureIdle(daemon: DaemonHandle, client: IPCClient,
                             server: RefServer) async throws -> (threads: [ThreadSwitches.Thread], pings: Int) {
        try await waitForLink(client)
        // One session, used once: what the daemon keeps for it (the store, the router) is warm.
        let session = try await client.open(service: "echo").session
        try await client.send(session: session, text: "warm-up")
        for try await event in client.events {
            if case .message(let message) = event, message.session == session {
                try await client.ack(session: session, seq: message.seq)
                break
            }
        }
        // What traffic leaves behind settles (the allocator's trim timer, the store's last commit).
        try await Task.sleep(for: Self.warmUp)

        let framesBefore = try await framesIn(server)
        let before = ThreadSwitches(pid: daemon.pid)
        try await Task.sleep(for: Self.window)
        let after = ThreadSwitches(pid: daemon.pid)
        return (after.since(before), try await framesIn(server) - framesBefore)
    }

    private func waitForLink(_ client: IPCClient) async throws {
        for _ in 0..<150 {
            if try await client.status().filter({ $0 != " " }).contains("\"state\":\"connected\"") { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw IdleWakeupError("the link did not come up within 15 s")
    }

    /// `frames_in` of the server's `stats` (`ok {JSON}`): every frame the daemon sent it.
    private func framesIn(_ server: RefServer) async throws -> Int {
        let reply = await server.execute(.stats)
        let object = try? JSONSerialization.jsonObject(with: Data(reply.dropFirst("ok ".count).utf8)) as? [String: Any]
        guard let frames = object?["frames_in"] as? Int else { throw IdleWakeupError("no frames_in in the server's stats: \(reply)") }
        return frames
    }
}

struct IdleWakeupError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
