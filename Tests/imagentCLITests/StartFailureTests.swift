import Foundation
import IMAgentTestKit
import Testing

/// A start that fails half-way stops what it had started, in the order a
/// shutdown does (imagentd(8), EXIT STATUS): the real `imagentd` binary on real
/// SQLite files.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct StartFailureTests {
    /// The second daemon has its own store but the first one's socket. It has opened its store
    /// when the socket turns out to be in use; it says why it cannot start and closes the store as
    /// a shutdown does, leaving no write-ahead log to replay.
    @Test func aSocketAnotherDaemonServes_endsTheStart_andTheStoreItOpenedIsClosed() async throws {
        try await withRealDaemon { first in
            let setup = try await RealDaemon.prepare(.referenceServer()) { $0.socketPath = first.socketPath }
            defer {
                Task { try? await setup.server.stop() }
                removeTree(setup.directory)
            }

            let second = try await run(RealDaemon.binary, ["--config", setup.configPath])
            #expect(second.status != 0, "\(second.stderr)")
            #expect(second.stderr.contains("cannot serve IPC") && second.stderr.contains(first.socketPath), "\(second.stderr)")

            let database = setup.directory + "/imagentd.sqlite3"
            #expect(FileManager.default.fileExists(atPath: database), "the store was opened before the socket")
            let wal = (try? FileManager.default.attributesOfItem(atPath: database + "-wal")[.size] as? Int) ?? 0
            #expect(wal == 0, "a closed store leaves no log to replay; \(wal) bytes left")

            // The first daemon still serves its socket.
            let status = try await first.imagent(["status", "--json"])
            #expect(status.status == 0, "\(status.stderr)")
        }
    }
}
