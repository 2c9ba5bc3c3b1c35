import AgentStore
import Foundation
import NIOCore
import SQLiteDatabase
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Large payloads in segment files beside the database (`PayloadSegments`): real files in a temporary directory.
@Suite("Payload segment files", .serialized)
struct PayloadSegmentTests {
    static let large = 65536

    func segmentFiles(_ directory: TemporaryDirectory) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.contains("-payloads.") }.sorted()
    }

    func fileSize(_ path: String) -> Int {
        var status = stat()
        return stat(path, &status) == 0 ? Int(status.st_size) : -1
    }

    func withSegmentStore<T>(durability: Durability = .process, maximumSizeBytes: Int? = nil, segmentFileBytes: Int = 1 << 20,
                             in directory: TemporaryDirectory, _ body: (AgentStore) async throws -> T) async throws -> T {
        try await withOpenStore(StoreConfiguration(path: directory.databasePath, durability: durability,
                                                   maximumSizeBytes: maximumSizeBytes, segmentFileBytes: segmentFileBytes), body)
    }

    @Test(arguments: Durability.allCases)
    func largePayloads_goToAPrivateSegmentFile_onceEach_andReadBackByteExact(durability: Durability) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        // Private whatever the umask: the payloads are every user's messages.
        let previousMask = umask(0)
        defer { umask(previousMask) }
        let session = try await withSegmentStore(durability: durability, in: directory) { store async throws in
            let session = try await store.newSession()
            for seq in UInt64(1)...8 {
                let size = seq % 2 == 0 ? Self.large : 64
                try await store.appendOutbound(session: session.id, seq: seq, payload: payloadOf(size: size, seq: seq), on: testLoop).get()
                try await store.appendInbound(session: session.id, seq: seq, payload: payloadOf(size: size, seq: seq), on: testLoop).get()
            }
            let outbound = try await store.outbound(session: session.id, after: 0, limit: 100, on: testLoop).get()
            #expect(outbound.map(\.seq) == Array(1...8))
            #expect(outbound.allSatisfy { $0.payload == payloadOf(size: $0.seq % 2 == 0 ? Self.large : 64, seq: $0.seq) })
            // maxBytes counts a segment payload's length without reading it.
            let two = try await store.outbound(session: session.id, after: 0, limit: 100, maxBytes: Self.large + 64, on: testLoop).get()
            #expect(two.map(\.seq) == [1, 2])
            return session
        }
        let files = try segmentFiles(directory)
        #expect(files.count == 1)
        let segment = directory.path + "/" + files[0]
        // Each large payload is written once, to the segment; the database holds none of them.
        #expect(fileSize(segment) == 8 * Self.large)
        #expect(fileSize(directory.databasePath) + fileSize(directory.databasePath + "-wal") < 4 * Self.large)
        var status = stat()
        #expect(stat(segment, &status) == 0 && status.st_mode & 0o777 == 0o600)

        // After a restart, both queues read back from the segment, and the index counts its bytes.
        try await withSegmentStore(durability: durability, in: directory) { store async throws in
            let snapshot = try await store.load(on: testLoop).get()
            let stored = try #require(snapshot.sessions.first { $0.record.id == session.id })
            #expect(stored.outbox.map(\.payload) == (UInt64(1)...8).map { payloadOf(size: $0 % 2 == 0 ? Self.large : 64, seq: $0) })
            #expect(stored.inbox.map(\.payload) == stored.outbox.map(\.payload))
            let inbound = try await store.inbound(session: session.id, after: 3, limit: 2, on: testLoop).get()
            #expect(inbound.map(\.seq) == [4, 5] && inbound[0].payload == payloadOf(size: Self.large, seq: 4))
            let index = try await store.loadIndex(on: testLoop).get()
            let indexed = try #require(index.sessions.first { $0.record.id == session.id })
            #expect(indexed.outboxBytes == 4 * Self.large + 4 * 64)
            #expect(indexed.inboxBytes == 4 * Self.large + 4 * 64)
            let span = try await store.outboundSpan(session: session.id, after: 0, count: 2, on: testLoop).get()
            #expect(span.bytes == 64 + Self.large)
        }
    }

    /// A segment freed of its messages is deleted, except one full one kept as the spare, which
    /// becomes the next segment: renamed, and written over from its start.
    @Test(arguments: Durability.allCases)
    func aSegmentNoMessageIsIn_isDeletedOrKeptAsTheSpare_andTheSpareIsTheNextSegment(durability: Durability) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let file = { (segment: Int) in directory.path + "/store.sqlite-payloads.\(segment)" }
        try await withSegmentStore(durability: durability, segmentFileBytes: 4 * Self.large, in: directory) { store async throws in
            let session = try await store.newSession()
            for seq in UInt64(1)...12 {
                try await store.appendOutbound(session: session.id, seq: seq, payload: payloadOf(size: Self.large, seq: seq), on: testLoop).get()
            }
            #expect(try segmentFiles(directory) == ["store.sqlite-payloads.1", "store.sqlite-payloads.2", "store.sqlite-payloads.3"])
            // Seq 5 keeps the second segment; the first one's four messages are all acknowledged,
            // and it stays as the spare.
            try await store.markAcked(session: session.id, upTo: 5, on: testLoop).get()
            #expect(try segmentFiles(directory).count == 3 && fileSize(file(1)) == 4 * Self.large)
            // The second is deleted (there is a spare already); the current segment stays to take the next messages.
            try await store.markAcked(session: session.id, upTo: 12, on: testLoop).get()
            #expect(try segmentFiles(directory) == ["store.sqlite-payloads.1", "store.sqlite-payloads.3"])
            // The third is full: the next message goes to the spare, renamed as the fourth, at its start.
            try await store.appendOutbound(session: session.id, seq: 13, payload: payloadOf(size: Self.large, seq: 13), on: testLoop).get()
            #expect(try segmentFiles(directory) == ["store.sqlite-payloads.3", "store.sqlite-payloads.4"])
            #expect(fileSize(file(4)) == 4 * Self.large, "the spare was written over, not grown")
            for seq in UInt64(14)...15 {
                try await store.appendOutbound(session: session.id, seq: seq, payload: payloadOf(size: Self.large, seq: seq), on: testLoop).get()
            }
            let stored = try await store.outbound(session: session.id, after: 0, limit: 10, on: testLoop).get()
            #expect(stored.map(\.seq) == [13, 14, 15])
            #expect(stored.allSatisfy { $0.payload == payloadOf(size: Self.large, seq: $0.seq) })
            // Closing a session frees its segments too.
            try await store.closeSession(session.id, on: testLoop).get()
        }
        // An open removes every segment no row refers to, the spare among them.
        try await withSegmentStore(durability: durability, in: directory) { store async throws in
            #expect(try await store.integrityCheck(on: testLoop).get() == ["ok"])
        }
        #expect(try segmentFiles(directory) == ["store.sqlite-payloads.5"], "only the segment the last open started is left")
    }

    @Test func aSegmentNoRowRefersTo_isRemovedAtOpen_andNewMessagesNeverAppendToAnOldOne() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let session = try await withSegmentStore(in: directory) { store async throws in
            let session = try await store.newSession()
            try await store.appendOutbound(session: session.id, seq: 1, payload: payloadOf(size: Self.large, seq: 1), on: testLoop).get()
            return session
        }
        let kept = try segmentFiles(directory)
        // What a writer killed before its commit leaves: bytes no row refers to, in a file of their own…
        let orphan = directory.path + "/store.sqlite-payloads.77"
        #expect(FileManager.default.createFile(atPath: orphan, contents: Data(repeating: 1, count: 1000)))
        // …and at the end of the segment a committed row refers to.
        let tail = try FileHandle(forWritingTo: URL(fileURLWithPath: directory.path + "/" + kept[0]))
        try tail.seekToEnd()
        try tail.write(contentsOf: Data(repeating: 2, count: 500))
        try tail.close()

        try await withSegmentStore(in: directory) { store async throws in
            #expect(!FileManager.default.fileExists(atPath: orphan))
            try await store.appendOutbound(session: session.id, seq: 2, payload: payloadOf(size: Self.large, seq: 2), on: testLoop).get()
            let stored = try await store.outbound(session: session.id, after: 0, limit: 10, on: testLoop).get()
            #expect(stored.map(\.payload) == [payloadOf(size: Self.large, seq: 1), payloadOf(size: Self.large, seq: 2)])
        }
        // The new message went to a segment numbered after every old one.
        let files = try segmentFiles(directory)
        #expect(files.contains(kept[0]) && files.contains("store.sqlite-payloads.78"))
    }

    @Test func aDamagedPayload_failsItsCRC_asACorruptStore() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let session = try await withSegmentStore(in: directory) { store async throws in
            let session = try await store.newSession()
            try await store.appendInbound(session: session.id, seq: 1, payload: payloadOf(size: Self.large, seq: 1), on: testLoop).get()
            return session
        }
        let segment = directory.path + "/" + (try segmentFiles(directory))[0]
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: segment))
        try handle.seek(toOffset: 1000)
        try handle.write(contentsOf: Data([0xFF]))
        try handle.close()
        try await withSegmentStore(in: directory) { store async throws in
            let error = await #expect(throws: StoreError.self) {
                try await store.inbound(session: session.id, after: 0, limit: 1, on: testLoop).get()
            }
            guard case .corrupt(let message)? = error else {
                Issue.record("expected .corrupt, got \(String(describing: error))")
                return
            }
            #expect(message.contains("CRC"))
        }
    }

    @Test(arguments: Durability.allCases)
    func segmentFilesCountAgainstTheSizeLimit_aRefusedBatchLeavesNoBytes_andAcksMakeRoom(durability: Durability) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let limit = 2 << 20
        try await withSegmentStore(durability: durability, maximumSizeBytes: limit, segmentFileBytes: 512 << 10, in: directory) { store async throws in
            let session = try await store.newSession()
            var (seq, refusal) = try await fillUntilRefused(store, session: session.id, after: 0)
            guard case .full? = refusal else {
                Issue.record("expected .full, got \(String(describing: refusal)) after \(seq) messages")
                return
            }
            #expect(seq >= 20, "refused after \(seq) messages of 64 KiB under a 2 MiB limit")
            #expect(try bytesOnDisk(directory) <= limit, "database and segments hold more than the \(limit) limit")
            // Every byte in the segments belongs to a stored message: the refused one left none.
            #expect(try segmentBytesOnDisk(directory) == Int(seq) * Self.large)

            try await store.markAcked(session: session.id, upTo: seq, on: testLoop).get()
            for next in seq + 1...seq + 10 {
                try await store.appendOutbound(session: session.id, seq: next, payload: payloadOf(size: Self.large, seq: next), on: testLoop).get()
            }
            let stored = try await store.outbound(session: session.id, after: 0, limit: 100, on: testLoop).get()
            #expect(stored.map(\.seq) == Array(seq + 1...seq + 10))
            #expect(stored.allSatisfy { $0.payload == payloadOf(size: Self.large, seq: $0.seq) })
            // Filled again to the limit: the segment kept as the spare gives its room back, so about
            // as many fit as the first time (less what the current segment holds of acknowledged ones).
            try await store.markAcked(session: session.id, upTo: seq + 10, on: testLoop).get()
            let first = seq
            (seq, refusal) = try await fillUntilRefused(store, session: session.id, after: seq + 10)
            let second = seq - first - 10
            #expect(refusal != nil && second + 8 >= first, "\(second) messages fit after the acknowledgements, \(first) before")
            #expect(try bytesOnDisk(directory) <= limit, "database and segments hold more than the \(limit) limit after the refill")
        }
    }

    /// Appends 64 KiB messages after `seq` until the store refuses one (at most 100): the last seq stored and the refusal.
    func fillUntilRefused(_ store: AgentStore, session: UInt64, after seq: UInt64) async throws -> (UInt64, StoreError?) {
        var last = seq
        while last < seq + 100 {
            do {
                try await store.appendOutbound(session: session, seq: last + 1, payload: payloadOf(size: Self.large, seq: last + 1),
                                               on: testLoop).get()
                last += 1
            } catch let error as StoreError {
                return (last, error)
            }
        }
        return (last, nil)
    }

    /// What the segment files take on the disk.
    func segmentBytesOnDisk(_ directory: TemporaryDirectory) throws -> Int {
        try segmentFiles(directory).map { fileSize(directory.path + "/" + $0) }.reduce(0, +)
    }

    /// What the database and its segment files take on the disk.
    func bytesOnDisk(_ directory: TemporaryDirectory) throws -> Int {
        try segmentBytesOnDisk(directory) + fileSize(directory.databasePath)
    }

    /// CRC-32C a bit at a time: the reference the store's records are held to.
    static func crc32c(_ buffer: ByteBuffer) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in buffer.readableBytesView {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
        }
        return crc ^ 0xFFFF_FFFF
    }

    /// A large payload's CRC given with it is what the store records (not computed again), and
    /// what a read of it hands back; a wrong one makes its read fail as corrupt.
    @Test func aGivenCRC_isRecorded_andComesBackWithTheRead() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try await withSegmentStore(in: directory) { store async throws in
            let session = try await store.newSession()
            let first = payloadOf(size: Self.large, seq: 1), second = payloadOf(size: Self.large, seq: 2)
            let firstCRC = Self.crc32c(first)
            _ = try await store.perform([
                .appendOutbound(session: session.id, seq: 1, payload: first, expiresAtMS: nil, payloadCRC: firstCRC),
                .appendOutbound(session: session.id, seq: 2, payload: second, expiresAtMS: nil),
                .appendOutbound(session: session.id, seq: 3, payload: bytes("small"), expiresAtMS: nil),
            ], on: testLoop).get()
            let read = try await store.outbound(session: session.id, after: 0, limit: 10, on: testLoop).get()
            #expect(read.map(\.payloadCRC) == [firstCRC, Self.crc32c(second), nil])

            let other = try await store.newSession()
            _ = try await store.perform([.appendOutbound(session: other.id, seq: 1, payload: first, expiresAtMS: nil,
                                                         payloadCRC: firstCRC ^ 1)], on: testLoop).get()
            await #expect(throws: StoreError.self) { _ = try await store.outbound(session: other.id, after: 0, limit: 10, on: testLoop).get() }
        }
    }
}
