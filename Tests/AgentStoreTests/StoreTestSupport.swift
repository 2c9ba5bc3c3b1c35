import AgentStore
import Foundation
import IMAgentTestKit
import NIOCore
import NIOPosix
import SQLiteDatabase
import Testing

/// A temporary directory for one test's database, removed afterwards.
struct TemporaryDirectory {
    let path: String

    init() throws {
        path = try makeTemporaryDirectory(prefix: "agentstore")
    }

    var databasePath: String { path + "/store.sqlite" }

    func remove() {
        removeTree(path)
    }
}

/// The event loop the daemon would pass: one loop, shared by every test.
let testLoop: EventLoop = MultiThreadedEventLoopGroup.singleton.next()

/// Opens the store `configuration` describes, runs `body`, and closes the store whether or not `body` throws.
func withOpenStore<T>(_ configuration: StoreConfiguration, _ body: (AgentStore) async throws -> T) async throws -> T {
    let store = try await AgentStore.open(configuration, on: testLoop).get()
    do {
        let result = try await body(store)
        try await store.close(on: testLoop).get()
        return result
    } catch {
        try? await store.close(on: testLoop).get()
        throw error
    }
}

/// Opens a store in a fresh temporary directory, runs `body`, closes the store and removes the files.
func withStore<T>(durability: Durability = .process, maximumSizeBytes: Int? = nil,
                  writerLinger: TimeAmount = StoreConfiguration.defaultWriterLinger,
                  _ body: (AgentStore, TemporaryDirectory) async throws -> T) async throws -> T {
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    return try await withOpenStore(StoreConfiguration(path: directory.databasePath, durability: durability,
                                                      maximumSizeBytes: maximumSizeBytes, writerLinger: writerLinger)) { store in
        try await body(store, directory)
    }
}

/// Opens the store at `path` again (as a restarted daemon would), runs `body`, closes it.
func reopen<T>(_ path: String, durability: Durability = .process,
               _ body: (AgentStore) async throws -> T) async throws -> T {
    try await withOpenStore(StoreConfiguration(path: path, durability: durability), body)
}

func bytes(_ text: String) -> ByteBuffer { ByteBuffer(string: text) }

func payloadOf(size: Int, seq: UInt64) -> ByteBuffer {
    var buffer = ByteBuffer()
    buffer.reserveCapacity(size)
    for index in 0..<size { buffer.writeInteger(UInt8(truncatingIfNeeded: seq &+ UInt64(index))) }
    return buffer
}

extension AgentStore {
    /// A session with defaults, for tests that need just "a session".
    func newSession(service: String = "echo", owner: UInt32 = 1000) async throws -> SessionRecord {
        try await createSession(service: service, ownerUID: owner, createdAtMS: 1_700_000_000_000, on: testLoop).get()
    }
}

/// Submits every operation as its own submission at once, and waits for all of them.
/// Appends `seqs` to `session` from the test loop in one turn, waits for them, and returns how
/// many transactions committed meanwhile.
func commitsOfAppendsInOneLoopTurn(_ store: AgentStore, session: UInt64, seqs: ClosedRange<UInt64>) async throws -> Int {
    let before = store.statistics.commits
    let futures = try await testLoop.submit {
        seqs.map { seq in store.appendOutbound(session: session, seq: seq, payload: bytes("x"), on: testLoop) }
    }.get()
    for future in futures { try await future.get() }
    return store.statistics.commits - before
}

func submitAll(_ store: AgentStore, _ operations: [StoreOperation]) async throws {
    let futures = operations.map { store.perform([$0], on: testLoop) }
    try await EventLoopFuture.andAllSucceed(futures, on: testLoop).get()
}

/// Nanoseconds on the monotonic clock.
func monotonicNanoseconds() -> UInt64 { DispatchTime.now().uptimeNanoseconds }
