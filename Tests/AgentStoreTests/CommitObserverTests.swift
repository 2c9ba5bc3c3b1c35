import AgentStore
import NIOConcurrencyHelpers
import Testing

/// `StoreCommitObserver`: what a daemon's histograms hear of each commit.
@Suite struct CommitObserverTests {
    @Test func theObserverHearsEveryCommittedTransaction_withItsTimeAndOperations() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let heard = NIOLockedValueBox<[(duration: Duration, operations: Int)]>([])
        let store = try await AgentStore.open(StoreConfiguration(path: directory.databasePath), on: testLoop,
                                              observer: { duration, operations in heard.withLockedValue { $0.append((duration, operations)) } }).get()
        let session = try await store.newSession()
        try await submitAll(store, (1...2000 as ClosedRange<UInt64>).map {
            .appendOutbound(session: session.id, seq: $0, payload: bytes("x"), expiresAtMS: nil)
        })
        let statistics = store.statistics
        try await store.close(on: testLoop).get()
        let commits = heard.withLockedValue { $0 }
        #expect(commits.count == statistics.commits)
        #expect(commits.reduce(0) { $0 + $1.operations } == statistics.operations)
        #expect(commits.map(\.operations).max() == statistics.largestBatch)
        #expect(commits.allSatisfy { $0.duration > .zero })
    }
}
