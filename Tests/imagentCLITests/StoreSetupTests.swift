import AgentIPC
import Foundation
import IMAgentTestKit
import Testing

/// A store that cannot be redirected, and a damaged one an operator can act
/// on (imagentd(8), EXIT STATUS and FILES): the real `imagentd` binary on real
/// SQLite files.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct StoreSetupTests {
    private func mode(_ path: String) -> mode_t {
        var status = stat()
        return stat(path, &status) == 0 ? status.st_mode & 0o7777 : 0o7777
    }

    /// A configuration whose store is `setup.directory/store`, a directory the test prepares.
    private func prepare() async throws -> (RealDaemon.Setup, store: String) {
        let setup = try await RealDaemon.prepare(.referenceServer()) { $0.storeDirectory += "/store" }
        let store = setup.directory + "/store"
        try #require(mkdir(store, 0o700) == 0)
        return (setup, store)
    }

    @Test(arguments: ["-wal", "-shm", "-journal", ""])
    func aSymbolicLinkInPlaceOfAStoreFile_isRefused_andItsTargetIsLeftAlone(suffix: String) async throws {
        let (setup, store) = try await prepare()
        let target = setup.directory + "/elsewhere"
        try "another user's file\n".write(toFile: target, atomically: true, encoding: .utf8)
        #expect(chmod(target, 0o644) == 0)
        let link = store + "/imagentd.sqlite3" + suffix
        #expect(symlink(target, link) == 0)

        let started = try await run(RealDaemon.binary, ["--config", setup.configPath])
        #expect(started.status == 78, "\(started.stderr)")
        #expect(started.stderr.contains("\(link) is a symbolic link"), "\(started.stderr)")
        #expect(mode(target) == 0o644, "the link's target was changed: \(String(mode(target), radix: 8))")
        #expect(try String(contentsOfFile: target, encoding: .utf8) == "another user's file\n")
        await setup.discard()
    }

    @Test func aDirectoryInPlaceOfAStoreFile_isRefused() async throws {
        let (setup, store) = try await prepare()
        let path = store + "/imagentd.sqlite3-shm"
        #expect(mkdir(path, 0o700) == 0)
        let started = try await run(RealDaemon.binary, ["--config", setup.configPath])
        #expect(started.status == 78, "\(started.stderr)")
        #expect(started.stderr.contains("\(path) is not a regular file"), "\(started.stderr)")
        await setup.discard()
    }

    @Test func aStoreDirectoryOwnedByAnotherUser_isRefusedAtStart() async throws {
        try #require(geteuid() == 0, "needs root to give the directory to uid 65534")
        let (setup, store) = try await prepare()
        #expect(chown(store, 65534, 65534) == 0)
        let started = try await run(RealDaemon.binary, ["--config", setup.configPath])
        #expect(started.status == 78, "\(started.stderr)")
        #expect(started.stderr.contains("the store directory \(store) is owned by"), "\(started.stderr)")
        #expect(started.stderr.contains("uid 65534") && started.stderr.contains("chown"), "\(started.stderr)")
        #expect(!FileManager.default.fileExists(atPath: store + "/imagentd.sqlite3"), "nothing is created in it")
        await setup.discard()
    }

    @Test func aStoreDirectoryOthersMayWriteTo_isRefusedAtStart() async throws {
        let (setup, store) = try await prepare()
        #expect(chmod(store, 0o777) == 0)
        let started = try await run(RealDaemon.binary, ["--config", setup.configPath])
        #expect(started.status == 78, "\(started.stderr)")
        #expect(started.stderr.contains("the store directory \(store) is mode 0777, writable by its group and other users"),
                "\(started.stderr)")
        #expect(started.stderr.contains("chmod 0700 \(store)"), "\(started.stderr)")
        #expect(mode(store) == 0o777, "left as it was for the operator to look at")
        await setup.discard()
    }

    @Test func aStoreDirectoryOthersMayOnlyRead_isMadePrivate() async throws {
        let (setup, store) = try await prepare()
        #expect(chmod(store, 0o755) == 0)
        let daemon = try await RealDaemon.launch(setup)
        #expect(mode(store) == 0o700)
        #expect(daemon.log.contains("the store directory \(store) was mode 0755; set it to 0700"), "\(daemon.log)")
        await daemon.stop()
    }

    /// Start-up on a store with a page overwritten: the file is named, the status is
    /// 65 (which the units do not restart on), and `--check-store` says the same.
    @Test func aDamagedStore_stopsTheStartWithItsPathAndStatus65_andCheckStoreFindsIt() async throws {
        let setup = try await RealDaemon.prepare()
        let database = setup.directory + "/imagentd.sqlite3"
        let daemon = try await RealDaemon.launch(setup)
        let client = try await IPCClient.connect(socketPath: setup.socketPath, clientName: "damage")
        for index in 0..<20 {
            let session = try await client.open(service: "sink").session
            _ = try await client.send(session: session, text: String(repeating: "payload \(index) ", count: 200))
        }
        // A running daemon's store is not checked.
        let busy = try await run(RealDaemon.binary, ["--check-store", "--config", setup.configPath])
        #expect(busy.status == 1, "\(busy.stdout)\(busy.stderr)")
        #expect(busy.stderr.contains("in use by a running imagentd") && busy.stderr.contains("stop it first"), "\(busy.stderr)")
        await client.close()
        await daemon.handle.stop()

        let sound = try await run(RealDaemon.binary, ["--check-store", "--config", setup.configPath])
        #expect(sound.status == 0, "\(sound.stdout)\(sound.stderr)")
        #expect(sound.stdout == "\(database): ok\n")

        // Every page but the header's overwritten, as a failing disk or a stray write would.
        let wal = (try? FileManager.default.attributesOfItem(atPath: database + "-wal")[.size] as? Int) ?? 0
        try #require(wal == 0, "a clean stop leaves no log to replay over the damage")
        let handle = try #require(FileHandle(forUpdatingAtPath: database))
        let header = try #require(try handle.read(upToCount: 18))
        let pageSize = Int(header[16]) << 8 | Int(header[17])
        let size = Int(try handle.seekToEnd())
        try #require(pageSize >= 512 && size >= 3 * pageSize, "page size \(pageSize), file \(size) bytes")
        try handle.seek(toOffset: UInt64(pageSize))
        try handle.write(contentsOf: Data(repeating: 0xA5, count: size - pageSize))
        try handle.close()

        let started = try await run(RealDaemon.binary, ["--config", setup.configPath])
        #expect(started.status == 65, "\(started.stderr)")
        #expect(started.stderr.contains("the store database \(database) is damaged"), "\(started.stderr)")
        #expect(started.stderr.contains("imagentd --check-store --config \(setup.configPath)"), "\(started.stderr)")
        #expect(started.stderr.contains("restore \(database) from a backup, or move it aside"), "\(started.stderr)")

        let damaged = try await run(RealDaemon.binary, ["--check-store", "--config", setup.configPath])
        #expect(damaged.status == 65, "\(damaged.stdout)\(damaged.stderr)")
        #expect(damaged.stdout.hasPrefix("\(database): damaged\n"), "\(damaged.stdout)")
        await setup.discard()
    }

    @Test func checkStore_onAnInvalidConfiguration_exits78() async throws {
        let directory = try FakeDaemon.makeTemporaryDirectory()
        defer { removeTree(directory) }
        try "[store]\nnot_a_key = 1\n".write(toFile: directory + "/bad.toml", atomically: true, encoding: .utf8)
        let checked = try await run(RealDaemon.binary, ["--check-store", "--config", directory + "/bad.toml"])
        #expect(checked.status == 78, "\(checked.stderr)")
        #expect(checked.stderr.contains("bad.toml:2"), "\(checked.stderr)")
    }
}
