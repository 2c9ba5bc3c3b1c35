import AgentStore
import NIOCore
import Testing

/// The writer thread looks for more work for a while after each commit
/// (`StoreConfiguration.writerLinger`). These tests use lingers far longer than
/// any commit, so a submission that waited for the linger to end would show.
/// One at a time: a lingering writer keeps a processor busy until its store closes
/// (or another thread wants that processor).
@Suite("Writer linger", .serialized)
struct WriterLingerTests {
    /// Well under the lingers below: a submission taken by the lingering writer completes within
    /// it. Generous: under the whole suite on two cores one commit of the store's tests can take seconds.
    static let promptly = Duration.seconds(30)
    static let long = TimeAmount.seconds(120)

    @Test func aSubmissionWhileTheWriterLingers_commitsAtOnce() async throws {
        try await withStore(writerLinger: Self.long) { store, _ in
            let session = try await store.newSession()  // a commit: the writer lingers now
            for seq in 1...5 as ClosedRange<UInt64> {
                let start = ContinuousClock.now
                try await store.appendOutbound(session: session.id, seq: seq, payload: bytes("x"), on: testLoop).get()
                #expect(ContinuousClock.now - start < Self.promptly)
            }
            #expect(store.statistics.commits == 6)
        }
    }

    @Test func submissionsOfOneLoopTurn_whileTheWriterLingers_commitAsOneTransaction() async throws {
        try await withStore(writerLinger: Self.long) { store, _ in
            let session = try await store.newSession()  // the writer lingers after this commit
            #expect(try await commitsOfAppendsInOneLoopTurn(store, session: session.id, seqs: 1...3) == 1)
        }
    }

    @Test func aSubmissionFromAnotherThread_wakesTheLingeringWriter() async throws {
        try await withStore(writerLinger: Self.long) { store, _ in
            let session = try await store.newSession()
            // Submitted from this task's thread, not the loop: handed over at once.
            let start = ContinuousClock.now
            try await store.appendOutbound(session: session.id, seq: 1, payload: bytes("x"), on: testLoop).get()
            #expect(ContinuousClock.now - start < Self.promptly)
        }
    }

    @Test func afterTheLinger_theWriterSleeps_andALaterSubmissionStillCommits() async throws {
        try await withStore(writerLinger: .milliseconds(1)) { store, _ in
            let session = try await store.newSession()
            for seq in 1...3 as ClosedRange<UInt64> {
                try await Task.sleep(for: .milliseconds(50))  // the linger is long over: the writer sleeps
                let start = ContinuousClock.now
                try await store.appendOutbound(session: session.id, seq: seq, payload: bytes("x"), on: testLoop).get()
                #expect(ContinuousClock.now - start < Self.promptly)
            }
            #expect(try await store.session(session.id, on: testLoop).get()?.sentSeq == 3)
        }
    }

    @Test func closingWhileTheWriterLingers_closesAtOnce() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try await AgentStore.open(StoreConfiguration(path: directory.databasePath, writerLinger: Self.long),
                                              on: testLoop).get()
        _ = try await store.newSession()
        let start = ContinuousClock.now
        try await store.close(on: testLoop).get()
        #expect(ContinuousClock.now - start < Self.promptly)
    }

    @Test func noLinger_stillCommitsEverySubmission() async throws {
        try await withStore(writerLinger: .zero) { store, _ in
            let session = try await store.newSession()
            try await submitAll(store, (1...500 as ClosedRange<UInt64>).map {
                .appendOutbound(session: session.id, seq: $0, payload: bytes("x"), expiresAtMS: nil)
            })
            #expect(try await store.session(session.id, on: testLoop).get()?.sentSeq == 500)
        }
    }
}
