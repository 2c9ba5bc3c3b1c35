import Foundation
import Testing

/// The real `imagentd` as systemd runs it: `Type=notify` with a watchdog, and
/// socket activation. systemd itself is replaced by what it hands the
/// process: a notification datagram socket, `WATCHDOG_USEC`, and a listening
/// socket on descriptor 3 with `LISTEN_FDS`/`LISTEN_PID`.
@Suite(.timeLimit(.minutes(1)))
struct SystemdIntegrationTests {
    @Test func notifiesReadyStatusAndWatchdog_servesThePassedSocket_andSaysStopping() async throws {
        let setup = try await RealDaemon.prepare()
        defer { try? FileManager.default.removeItem(atPath: setup.directory) }
        let notifications = try NotificationSocket(path: setup.directory + "/notify")
        defer { notifications.close() }
        let listener = try listeningUnixSocket(at: setup.socketPath)

        // LISTEN_PID must be the daemon's own pid: a shell exports its $$ and execs the daemon.
        let pid = try spawn(["/bin/sh", "-c", "export LISTEN_PID=$$ LISTEN_FDS=1; exec \"$0\" --config \"$1\"",
                             RealDaemon.binary.path, setup.configPath],
                            environment: ["NOTIFY_SOCKET": notifications.path, "WATCHDOG_USEC": "1000000",
                                          "SWIFT_BACKTRACE": "enable=no"],
                            passing: listener)
        Glibc.close(listener)

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

        kill(pid, SIGTERM)
        var stopping = false
        let deadline = ContinuousClock.now + .seconds(5)
        while !stopping, ContinuousClock.now < deadline {
            stopping = notifications.receive()?.contains("STOPPING=1") == true
        }
        #expect(stopping)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        #expect(status == 0, "exit status \(status)")
        // A socket systemd owns stays for the next start; the daemon's own admin socket goes.
        #expect(FileManager.default.fileExists(atPath: setup.socketPath))
        #expect(!FileManager.default.fileExists(atPath: admin))
        try await setup.server.stop()
    }
}

extension SystemdIntegrationTests {
    /// After SIGHUP, STATUS= follows the link again, whether the reload worked or not.
    @Test func afterAReload_evenAFailedOne_statusFollowsTheLinkAgain() async throws {
        let setup = try await RealDaemon.prepare()
        defer { try? FileManager.default.removeItem(atPath: setup.directory) }
        let notifications = try NotificationSocket(path: setup.directory + "/notify")
        defer { notifications.close() }
        let listener = try listeningUnixSocket(at: setup.socketPath)
        let pid = try spawn(["/bin/sh", "-c", "export LISTEN_PID=$$ LISTEN_FDS=1; exec \"$0\" --config \"$1\"",
                             RealDaemon.binary.path, setup.configPath],
                            environment: ["NOTIFY_SOCKET": notifications.path, "SWIFT_BACKTRACE": "enable=no"],
                            passing: listener)
        Glibc.close(listener)
        defer {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
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
            kill(pid, SIGHUP)
            let reloaded = collect(for: .seconds(5)) { $0.contains { $0.contains("READY=1") } }
            #expect(reloaded.first?.hasPrefix("RELOADING=1") == true, "\(reloaded)")
            let ready = reloaded.first { $0.contains("READY=1") }
            #expect(ready?.contains(connected) == true, "after SIGHUP with \(text): \(reloaded)")
            #expect(!reloaded.contains { $0.contains("configuration reloaded") })
        }
        try await setup.server.stop()
    }
}

/// A bound datagram socket that receives sd_notify messages.
private final class NotificationSocket {
    let path: String
    private let descriptor: Int32

    init(path: String) throws {
        self.path = path
        descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        try bindUnix(descriptor, path)
        var timeout = timeval(tv_sec: 0, tv_usec: 100_000)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    /// One datagram, or nil after 100 ms of silence.
    func receive() -> String? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = recv(descriptor, &buffer, buffer.count, 0)
        return count > 0 ? String(decoding: buffer[0..<count], as: UTF8.self) : nil
    }

    func close() { Glibc.close(descriptor) }
}

private func bindUnix(_ descriptor: Int32, _ path: String) throws {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: path.utf8.prefix($0.count - 1)) }
    let result = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    guard result == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
}

private func listeningUnixSocket(at path: String) throws -> Int32 {
    let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    try bindUnix(descriptor, path)
    guard listen(descriptor, 16) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
    return descriptor
}

/// posix_spawn with `listener` as descriptor 3, as systemd passes sockets.
private func spawn(_ argv: [String], environment extra: [String: String], passing listener: Int32) throws -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_adddup2(&actions, listener, 3)
    var environment = ProcessInfo.processInfo.environment
    environment["IMAGENT_SOCKET"] = nil
    environment.merge(extra) { $1 }
    let cArguments = argv.map { strdup($0) } + [nil]
    let cEnvironment = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer { (cArguments + cEnvironment).forEach { free($0) } }
    var pid: pid_t = 0
    let result = posix_spawn(&pid, argv[0], &actions, nil, cArguments, cEnvironment)
    guard result == 0 else { throw POSIXError(.init(rawValue: result) ?? .EIO) }
    return pid
}
