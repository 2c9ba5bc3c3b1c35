import AgentStore
import Foundation
import NIOCore
import SQLiteDatabase
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("Full store and full disk")
struct DiskFullTests {
    /// Appends 1 KiB messages one by one until the store refuses one; returns the error and the last seq stored.
    func fill(_ store: AgentStore, session: UInt64, from first: UInt64 = 1, limit: UInt64 = 100_000) async throws -> (StoreError, UInt64) {
        var seq = first
        while seq < first + limit {
            do {
                try await store.appendOutbound(session: session, seq: seq, payload: payloadOf(size: 1024, seq: seq), on: testLoop).get()
            } catch let error as StoreError {
                return (error, seq - 1)
            }
            seq += 1
        }
        Issue.record("the store never filled up after \(limit) messages")
        return (.closed, seq - 1)
    }

    @Test func sizeLimitReached_failsTheBatchWithFull_leavesNoTrace_andRecoversWhenAcksFreeSpace() async throws {
        try await withStore(maximumSizeBytes: 256 * 1024) { store, directory in
            let session = try await store.newSession()
            let (error, lastStored) = try await fill(store, session: session.id)
            guard case .full(let message) = error else {
                Issue.record("expected .full, got \(error)")
                return
            }
            #expect(message.contains("full"))
            #expect(error.description.contains("refuse new messages"))
            #expect(lastStored > 50)
            #expect(try await store.integrityCheck(on: testLoop).get() == ["ok"])
            // The refused message left nothing behind: the counter and the outbox stop at the last success.
            let record = try #require(try await store.session(session.id, on: testLoop).get())
            #expect(record.sentSeq == lastStored)
            #expect(try await store.outbound(session: session.id, after: lastStored, limit: 10, on: testLoop).get().isEmpty)

            // In the same batch, appends are refused but the ACK that frees space still commits.
            let refused = store.appendOutbound(session: session.id, seq: lastStored + 1,
                                               payload: payloadOf(size: 1024, seq: lastStored + 1), on: testLoop)
            let acked = store.markAcked(session: session.id, upTo: lastStored, on: testLoop)
            await #expect(throws: StoreError.self) { try await refused.get() }
            try await acked.get()
            #expect(store.statistics.fullRejections >= 2)

            // Space is back: appends work again, continuing the seq space.
            for seq in lastStored + 1...lastStored + 20 {
                try await store.appendOutbound(session: session.id, seq: seq, payload: payloadOf(size: 1024, seq: seq), on: testLoop).get()
            }
            #expect(try await store.integrityCheck(on: testLoop).get() == ["ok"])
            let stored = try await store.outbound(session: session.id, after: 0, limit: 100, on: testLoop).get()
            #expect(stored.map(\.seq) == Array(lastStored + 1...lastStored + 20))
            #expect(stored.allSatisfy { $0.payload == payloadOf(size: 1024, seq: $0.seq) })
            _ = directory
        }
    }

    @Test func diskFull_onARealTinyFilesystem_isATypedError_withoutCorruption_andRecovers() async throws {
        guard geteuid() == 0 else {
            print("skipped: mounting a tmpfs needs root")
            return
        }
        let mountPoint = try TemporaryDirectory()
        defer { mountPoint.remove() }
        guard mount("tmpfs", mountPoint.path, "tmpfs", 0, "size=8m,mode=0700") == 0 else {
            Issue.record("mount tmpfs on \(mountPoint.path) failed: errno \(errno)")
            return
        }
        defer { umount2(mountPoint.path, Int32(MNT_DETACH)) }

        let path = mountPoint.path + "/store.sqlite"
        let ballast = mountPoint.path + "/ballast"
        let store = try await AgentStore.open(StoreConfiguration(path: path, durability: .power), on: testLoop).get()
        do {
            let session = try await store.newSession()
            // Leave about 1.5 MiB free, so the database and its WAL run into the wall soon.
            let free = try FileManager.default.attributesOfFileSystem(forPath: mountPoint.path)[.systemFreeSize] as? Int ?? 0
            #expect(FileManager.default.createFile(atPath: ballast, contents: Data(count: max(0, free - 1_536 * 1024))))

            let (error, lastStored) = try await fill(store, session: session.id)
            switch error {
            case .full, .io: break
            default: Issue.record("expected .full or .io from a full disk, got \(error)")
            }
            print("tmpfs disk full after \(lastStored) messages of 1 KiB: \(error)")
            #expect(lastStored > 0)
            #expect(try await store.integrityCheck(on: testLoop).get() == ["ok"])

            // Free the disk: the same store carries on, from the next seq.
            try FileManager.default.removeItem(atPath: ballast)
            for seq in lastStored + 1...lastStored + 50 {
                try await store.appendOutbound(session: session.id, seq: seq, payload: payloadOf(size: 1024, seq: seq), on: testLoop).get()
            }
            try await store.close(on: testLoop).get()
        } catch {
            try? await store.close(on: testLoop).get()
            throw error
        }

        // A restart sees everything that was acknowledged, intact.
        let snapshot = try await reopen(path) { try await $0.load(on: testLoop).get() }
        let stored = try #require(snapshot.sessions.first)
        #expect(stored.outbox.map(\.seq) == Array(stride(from: 1, through: stored.record.sentSeq, by: 1)))
        #expect(stored.outbox.allSatisfy { $0.payload == payloadOf(size: 1024, seq: $0.seq) })
        #expect(try SQLiteDatabase(path: path).integrityCheck() == ["ok"])
    }
}
