import AgentIPC
import Foundation
import IMAgentTestKit
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A shutdown that cannot finish (imagentd(8), SIGNALS and EXIT STATUS): a second
/// SIGTERM, or the 15 s deadline, ends the daemon with status 1, and the store it
/// leaves keeps everything acknowledged. The real `imagentd` keeps its store on a
/// small ext4 filesystem the test freezes, so the store's writer blocks in the
/// kernel and the shutdown's last step (the store finishing what is queued) waits.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct ShutdownDeadlineTests {
    @Test func aSecondSigterm_endsAHangingShutdownAtOnce_withStatus1() async throws {
        try await withHangingShutdown { daemon, _ in
            daemon.signal(SIGTERM)
            let ended = try await poll(within: .seconds(2)) {
                daemon.log.contains("SIGTERM while shutting down: ending now") ? true : nil
            }
            #expect(ended == true, "no 'ending now' within 2 s of the second SIGTERM; daemon log:\n\(daemon.log)")
        }
    }

    @Test func theDeadline_endsAHangingShutdownAfter15s_withStatus1() async throws {
        try await withHangingShutdown { daemon, shutdownBegan in
            let ended = try await poll(within: .seconds(25), every: .milliseconds(200)) {
                daemon.log.contains("still shutting down after 15 s: ending now") ? ContinuousClock.now : nil
            }
            #expect(ended != nil, "no deadline line within 25 s of SIGTERM; daemon log:\n\(daemon.log)")
            if let ended { #expect(ended - shutdownBegan >= .seconds(14), "the deadline came \(ended - shutdownBegan) after SIGTERM") }
        }
    }

    /// Starts a daemon whose store is on a frozen filesystem, with a SEND waiting on
    /// the store, and SIGTERMs it; once it waits on the store, `body` ends the shutdown.
    /// Then it thaws the filesystem and checks the exit status (1), the store
    /// (`--check-store`) and a restart on it, which still has the acknowledged message.
    /// `body` is given the daemon and when the first SIGTERM went.
    private func withHangingShutdown(_ body: (RealDaemon, ContinuousClock.Instant) async throws -> Void) async throws {
        guard let filesystem = try await FreezableFilesystem.make() else { return }
        var daemon: RealDaemon?
        var client: IPCClient?
        do {
            let setup = try await RealDaemon.prepare(.referenceServer()) { config in
                config.storeDirectory = filesystem.mountPoint + "/store"
                config.agentID = "shutdown-deadline-test"
                config.durability = "power"
                config.logLevel = "debug"  // "stopping part=store" says the shutdown has reached the store
            }
            filesystem.owner = setup
            let running = try await RealDaemon.launch(setup)
            daemon = running
            _ = try await running.waitForLink("connected")
            let connected = try await IPCClient.connect(socketPath: setup.socketPath, clientName: "shutdown-deadline")
            client = connected
            let session = try await connected.open(service: "sink").session
            let acknowledged = try await connected.send(session: session, text: "stored before the freeze")

            try filesystem.freeze()
            // Not acknowledged: its commit blocks on the frozen filesystem.
            let blocked = Task { try await connected.send(session: session, text: "sent while frozen") }
            let writerBlocked = try await poll(within: .seconds(5)) {
                uninterruptibleThreads(of: running.process.processIdentifier) > 0 ? true : nil
            }
            try #require(writerBlocked == true, "no daemon thread blocked on the frozen filesystem; log:\n\(running.log)")
            let shutdownBegan = ContinuousClock.now
            running.signal(SIGTERM)
            let waitsOnStore = try await poll(within: .seconds(10)) {
                running.log.contains("stopping") && running.log.contains("part=store") ? true : nil
            }
            try #require(waitsOnStore == true, "the shutdown never reached the store; daemon log:\n\(running.log)")
            try await Task.sleep(for: .milliseconds(300))
            #expect(running.process.isRunning, "the shutdown ended although the store cannot write; log:\n\(running.log)")

            try await body(running, shutdownBegan)

            // The process ends for good only once the blocked write returns.
            filesystem.thaw()
            let status = await running.waitForExit(within: .seconds(5))
            #expect(status == 1, "exit status \(status.map { "\($0)" } ?? "none within 5 s"); daemon log:\n\(running.log)")
            #expect(!running.log.contains("imagentd stopped"))
            let unacknowledged = await result(of: blocked, within: .seconds(5))
            #expect(unacknowledged != nil && (try? unacknowledged?.get()) == nil,
                    "the SEND sent while frozen was acknowledged or never answered: \(String(describing: unacknowledged))")
            await connected.close()
            client = nil

            let check = try await ChildProcess.run(RealDaemon.binary.path, ["--check-store", "--config", setup.configPath],
                                                   limit: .seconds(30))
            #expect(check.status == 0, "--check-store: \(check.stdout)\(check.stderr)")

            // A restart on the same store has the acknowledged message and stops cleanly.
            let restarted = try await RealDaemon.launch(setup)
            daemon = restarted
            let again = try await IPCClient.connect(socketPath: setup.socketPath, clientName: "shutdown-deadline-again")
            client = again
            let reopened = try await again.attach(session: session)
            #expect(reopened.sentSeq >= acknowledged, "restarted store's session: \(reopened); log:\n\(restarted.log)")
            await again.close()
            client = nil
            restarted.signal(SIGTERM)
            let clean = await restarted.waitForExit(within: .seconds(10))
            #expect(clean == 0, "the restarted daemon's stop: \(String(describing: clean)); log:\n\(restarted.log)")
        } catch {
            await client?.close()
            await filesystem.tearDown(daemon: daemon, keepingFiles: true)
            throw error
        }
        await filesystem.tearDown(daemon: daemon, keepingFiles: false)
    }

    /// How many of `pid`'s threads sleep uninterruptibly (state D): a write to a frozen filesystem does.
    private func uninterruptibleThreads(of pid: pid_t) -> Int {
        listDirectory("/proc/\(pid)/task").filter { thread in
            // "TID (NAME) STATE …": the name may hold spaces and parentheses, the state follows the last ')'.
            guard let stat = readFile("/proc/\(pid)/task/\(thread)/stat"), let end = stat.lastIndex(of: ")") else { return false }
            return stat[stat.index(after: end)...].dropFirst().first == "D"
        }.count
    }

    private func result<Value: Sendable>(of task: Task<Value, any Error>, within limit: Duration) async -> Result<Value, any Error>? {
        await withTaskGroup(of: Result<Value, any Error>?.self) { group in
            group.addTask { await task.result }
            group.addTask {
                try? await Task.sleep(for: limit)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }
}

/// A 32 MB ext4 filesystem in a loop-mounted file, which `fsfreeze` can freeze; nil
/// (with the reason printed) where that cannot be done: not root, or no loop devices,
/// `mkfs.ext4` or `fsfreeze`.
private final class FreezableFilesystem: @unchecked Sendable {  // used by one test at a time
    let directory: String
    var mountPoint: String { directory + "/mnt" }
    var image: String { directory + "/store.img" }
    /// The daemon's setup, whose server and folder go with the filesystem.
    var owner: RealDaemon.Setup?
    private var frozen = false

    private init(directory: String) { self.directory = directory }

    static func make() async throws -> FreezableFilesystem? {
        guard geteuid() == 0 else {
            print("skipped: a loop-mounted filesystem and fsfreeze need root")
            return nil
        }
        let tools = runShell("test -e /dev/loop-control && command -v mkfs.ext4 && command -v fsfreeze && command -v losetup")
        guard tools.succeeded else {
            print("skipped: needs /dev/loop-control, mkfs.ext4, fsfreeze and losetup: \(tools.output)")
            return nil
        }
        let filesystem = FreezableFilesystem(directory: try makeTemporaryDirectory(prefix: "imagent-freeze"))
        let made = runShell("""
            truncate -s 32M '\(filesystem.image)' && mkfs.ext4 -q -F '\(filesystem.image)' && \
            mkdir '\(filesystem.mountPoint)' && mount -o loop '\(filesystem.image)' '\(filesystem.mountPoint)'
            """, timeoutSeconds: 30)
        guard made.succeeded else {
            print("skipped: cannot loop-mount an ext4 image (no usable loop device?): \(made.output)")
            removeTree(filesystem.directory)
            return nil
        }
        return filesystem
    }

    func freeze() throws {
        let result = runShell("fsfreeze -f '\(mountPoint)'")
        guard result.succeeded else { throw RealDaemonError("fsfreeze -f \(mountPoint): \(result.output)") }
        frozen = true
    }

    /// Quiet when it is not frozen.
    func thaw() {
        guard frozen else { return }
        runShell("fsfreeze -u '\(mountPoint)'")
        frozen = false
    }

    /// Thaws, stops the daemon, unmounts, then stops the server and removes the folders.
    func tearDown(daemon: RealDaemon?, keepingFiles: Bool) async {
        thaw()
        await daemon?.handle.stop(grace: .seconds(5))
        if !runShell("umount '\(mountPoint)'").succeeded {
            let lazy = runShell("umount -l '\(mountPoint)'")
            if !lazy.succeeded { print("cannot unmount \(mountPoint): \(lazy.output)") }
        }
        runShell("losetup -j '\(image)' | cut -d: -f1 | xargs -r -n1 losetup -d")
        if let owner { try? await owner.server.stop() }
        if keepingFiles, let owner {
            print("the daemon's files are kept in \(owner.directory); its log ends with:\n\(tailOfFile(owner.directory + "/imagentd.log"))")
        } else if let owner {
            removeTree(owner.directory)
        }
        removeTree(directory)
    }
}
