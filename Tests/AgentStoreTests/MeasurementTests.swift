import AgentStore
import Foundation
import NIOCore
import Testing

/// Keeps `window` appends in flight on the test loop — like that many clients each
/// waiting for ACCEPTED before sending the next — until `count` have committed.
/// Touched only on `testLoop`, hence `@unchecked Sendable`.
final class WindowedAppender: @unchecked Sendable {
    let store: AgentStore
    let session: UInt64
    let payload: ByteBuffer
    let count: UInt64
    private var next: UInt64 = 1
    private var committed: UInt64 = 0
    private let finished: EventLoopPromise<Void>

    init(store: AgentStore, session: UInt64, payload: ByteBuffer, count: UInt64) {
        self.store = store
        self.session = session
        self.payload = payload
        self.count = count
        self.finished = testLoop.makePromise()
    }

    func run(window: Int) -> EventLoopFuture<Void> {
        testLoop.execute {
            for _ in 0..<window { self.submitNext() }
        }
        return finished.futureResult
    }

    private func submitNext() {
        guard next <= count else { return }
        let seq = next
        next += 1
        store.appendOutbound(session: session, seq: seq, payload: payload, on: testLoop).whenComplete { result in
            switch result {
            case .success:
                self.committed += 1
                if self.committed == self.count { self.finished.succeed(()) } else { self.submitNext() }
            case .failure(let error):
                self.finished.fail(error)
            }
        }
    }
}

/// Figures for BENCHMARKS.md, printed, not asserted: they depend on the machine,
/// the build configuration and whatever else runs. Run alone for clean numbers:
/// `swift test --filter AgentStoreTests.MeasurementTests` (add `-c release` for release figures).
@Suite("Measurements", .serialized)
struct MeasurementTests {
    #if DEBUG
    static let build = "debug build"
    #else
    static let build = "release build"
    #endif

    @Test(arguments: Durability.allCases)
    func appendThroughput_withGroupCommit(durability: Durability) async throws {
        for size in [64, 1024] {
            for (label, window, count) in [("one at a time", 1, 500), ("64 in flight", 64, 20_000), ("all at once", 20_000, 20_000)] {
                try await withStore(durability: durability) { store, _ in
                    let session = try await store.newSession()
                    let before = store.statistics
                    let start = ContinuousClock.now
                    try await WindowedAppender(store: store, session: session.id, payload: payloadOf(size: size, seq: 0),
                                               count: UInt64(count)).run(window: window).get()
                    let seconds = Self.seconds(ContinuousClock.now - start)
                    let commits = store.statistics.commits - before.commits
                    #expect(try await store.session(session.id, on: testLoop).get()?.sentSeq == UInt64(count))
                    print("MEASURED append \(durability) \(size) B, \(label): \(count) messages in \(Self.format(seconds * 1000)) ms"
                        + " = \(Self.format(Double(count) / seconds)) messages/s, \(commits) commits"
                        + " = \(Self.format(Double(commits) / seconds)) commits/s, \(Self.format(Double(count) / Double(commits))) messages/commit"
                        + " [\(Self.build), \(ProcessInfo.processInfo.activeProcessorCount) cores]")
                }
            }
        }
    }

    @Test func loadingOneHundredThousandQueuedKiBMessages() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let count = 100_000
        let perSession = count / 10
        try await reopen(directory.databasePath) { store in
            let payload = payloadOf(size: 1024, seq: 0)
            for _ in 0..<10 {
                let session = try await store.newSession()
                for chunk in stride(from: 1, through: perSession, by: 1000) {
                    _ = try await store.perform((chunk..<chunk + 1000).map {
                        .appendOutbound(session: session.id, seq: UInt64($0), payload: payload, expiresAtMS: nil)
                    }, on: testLoop).get()
                }
            }
        }
        let fileBytes = (try FileManager.default.attributesOfItem(atPath: directory.databasePath)[.size] as? Int) ?? 0
        let (snapshot, openSeconds, loadSeconds) = try await {
            let start = ContinuousClock.now
            let store = try await AgentStore.open(StoreConfiguration(path: directory.databasePath), on: testLoop).get()
            let opened = ContinuousClock.now
            let snapshot = try await store.load(on: testLoop).get()
            let loaded = ContinuousClock.now
            try await store.close(on: testLoop).get()
            return (snapshot, Self.seconds(opened - start), Self.seconds(loaded - opened))
        }()
        let messages = snapshot.sessions.reduce(0) { $0 + $1.outbox.count }
        #expect(messages == count)
        #expect(snapshot.sessions.allSatisfy { $0.outbox.last?.payload.readableBytes == 1024 })
        print("MEASURED load: \(messages) queued 1 KiB messages in \(snapshot.sessions.count) sessions loaded in \(Self.format(loadSeconds * 1000)) ms"
            + " (open and migrate check \(Self.format(openSeconds * 1000)) ms; database \(fileBytes / 1_048_576) MiB) [\(Self.build)]")
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    static func format(_ value: Double) -> String {
        value >= 100 ? String(Int(value.rounded())) : String(format: "%.1f", value)
    }
}
