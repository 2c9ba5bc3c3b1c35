import Foundation
import IMAgentTestKit
import Testing

/// The real `imagentd` as systemd runs it: `Type=notify` with a watchdog, and
/// socket activation. systemd itself is replaced by what it hands the
/// process: a notification datagram socket, `WATCHDOG_USEC`, and a listening
/// socket on descriptor 3 with `LISTEN_FDS`/`LISTEN_PID`.
@Suite(.timeLimit(.minutes(1)))
struct SystemdIntegrationTests {
    @Test func notifiesReadyStatusAndWatchdog_servesThePassedSocket_andSaysStopping() async throws {
        try await withActivatedDaemon(setting: ["WATCHDOG_USEC": "1000000"]) { setup, notifications, daemon in
            var received: [(ContinuousClock.Instant, String)] = []
            let until = ContinuousClock.now + .seconds(4)
            while ContinuousClock.now < until {
                if let message = notifications.receive() { received.append((ContinuousClock.now, message)) }
            }
            let messages = received.map(\.1)
            #expect(messages.first?.contains("READY=1") == true, "first notification: \(messages.first ?? "none")")
            #expect(messages.contains { $0.contains("STATUS=connected to \(setup.server.address)") }, "\(messages)")
            // WatchdogSec=1s: a ping every 0.5 s, about 8 in 4 s.
            let pings = received.filter { $0.1 == "WATCHDOG=1" }.map(\.0)
            #expect((6...10).contains(pings.count), "\(pings.count) watchdog pings in 4 s")
            for (earlier, later) in zip(pings, pings.dropFirst()) {
                #expect(later - earlier < .milliseconds(900), "watchdog gap \(later - earlier)")
            }

            let ping = try await ImagentProcess.run(["--socket", setup.socketPath, "ping"])
            #expect(ping.status == 0, "\(ping.stderr)")
            // The passed socket serves (root's clients go through the admin socket the daemon bound beside it).
            let admin = setup.socketPath + ".admin"
            #expect(FileManager.default.fileExists(atPath: admin))
            let raw = try RawIPCSocket(path: setup.socketPath)
            #expect(raw.write(RawIPCSocket.hello()))
            if case .frame(let welcome) = raw.read() { #expect(welcome.op == 0x8001) } else { Issue.record("no WELCOME on the passed socket") }

            daemon.terminate()
            var stopping = false
            let deadline = ContinuousClock.now + .seconds(5)
            while !stopping, ContinuousClock.now < deadline {
                stopping = notifications.receive()?.contains("STOPPING=1") == true
            }
            #expect(stopping)
            daemon.waitUntilExit()
            #expect(daemon.terminationReason == .exit && daemon.terminationStatus == 0,
                    "exit status \(daemon.terminationStatus) (\(daemon.terminationReason))")
            // A socket systemd owns stays for the next start; the daemon's own admin socket goes.
            #expect(FileManager.default.fileExists(atPath: setup.socketPath))
            #expect(!FileManager.default.fileExists(atPath: admin))
        }
    }
}

extension SystemdIntegrationTests {
    /// After SIGHUP, STATUS= follows the link again, whether the reload worked or not.
    @Test func afterAReload_evenAFailedOne_statusFollowsTheLinkAgain() async throws {
        try await withActivatedDaemon { setup, notifications, daemon in
            func collect(for duration: Duration, until done: ([String]) -> Bool) -> [String] {
                var messages: [String] = []
                let until = ContinuousClock.now + duration
                while ContinuousClock.now < until, !done(messages) {
                    if let message = notifications.receive(), message != "WATCHDOG=1" { messages.append(message) }
                }
                return messages
            }
            let connected = "STATUS=connected to \(setup.server.address)"
            let started = collect(for: .seconds(10)) { $0.contains { $0.contains(connected) } }
            #expect(started.contains { $0.contains(connected) }, "\(started)")

            for text in ["[log]\nlevel = \"debug\"\n", "[server]\nendpoints = [\"broken\"]\n"] {
                let original = try String(contentsOfFile: setup.configPath, encoding: .utf8)
                try (text.hasPrefix("[server]") ? text : original + text).write(toFile: setup.configPath, atomically: true, encoding: .utf8)
                daemon.signal(SIGHUP)
                let reloaded = collect(for: .seconds(5)) { $0.contains { $0.contains("READY=1") } }
                #expect(reloaded.first?.hasPrefix("RELOADING=1") == true, "\(reloaded)")
                let ready = reloaded.first { $0.contains("READY=1") }
                #expect(ready?.contains(connected) == true, "after SIGHUP with \(text): \(reloaded)")
                #expect(!reloaded.contains { $0.contains("configuration reloaded") })
            }
        }
    }
}

/// Runs `body` with the daemon started as systemd starts it: a prepared folder and reference server,
/// a notification socket as `$NOTIFY_SOCKET`, and the listening IPC socket passed as descriptor 3
/// (`RealDaemon.Start.socketActivated`); kills what is left and removes it all after.
private func withActivatedDaemon(setting: [String: String] = [:],
                                 _ body: (RealDaemon.Setup, NotifyListener, ChildProcess) async throws -> Void) async throws {
    let setup = try await RealDaemon.prepare()
    let notifications: NotifyListener
    do {
        notifications = try NotifyListener(path: setup.directory + "/notify")
    } catch {
        await setup.discard()
        throw error
    }
    defer { notifications.close() }
    let start = RealDaemon.Start(environment: ["NOTIFY_SOCKET": notifications.path].merging(setting) { $1 }, socketActivated: true)
    try await withRealDaemon(setup, start) { daemon in
        try await body(setup, notifications, daemon.process)
    }
}
