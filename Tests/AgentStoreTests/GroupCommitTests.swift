import AgentStore
import NIOCore
import Testing

@Suite("Group commit")
struct GroupCommitTests {
    @Test func tenThousandAppendsSubmittedAtOnce_commitInFarFewerTransactions() async throws {
        try await withStore { store, _ in
            let session = try await store.newSession()
            let before = store.statistics
            let count = 10_000
            try await submitAll(store, (1...UInt64(count)).map {
                .appendOutbound(session: session.id, seq: $0, payload: payloadOf(size: 64, seq: $0), expiresAtMS: nil)
            })
            let after = store.statistics
            let commits = after.commits - before.commits
            print("group commit: \(count) single-operation submissions → \(commits) transactions, largest batch \(after.largestBatch)")
            #expect(after.operations - before.operations == count)
            #expect(commits >= 2, "the default batch limit is 8192 operations")
            #expect(commits <= count / 100, "\(commits) commits for \(count) operations: not batching")
            #expect(try await store.session(session.id, on: testLoop).get()?.sentSeq == UInt64(count))
        }
    }

    @Test func futuresComplete_inSubmissionOrder() async throws {
        try await withStore { store, _ in
            let session = try await store.newSession()
            let order = NIOLoopBoundBox.makeBoxSendingValue([UInt64](), eventLoop: testLoop)
            let futures = (1...2000 as ClosedRange<UInt64>).map { seq in
                store.appendOutbound(session: session.id, seq: seq, payload: bytes("x"), on: testLoop).map {
                    order.value.append(seq)
                }
            }
            for future in futures { try await future.get() }
            let seen = try await testLoop.submit { order.value }.get()
            #expect(seen == Array(1...2000))
        }
    }

    @Test func aLoneOperation_isCommittedAtOnce_withoutWaitingForCompany() async throws {
        try await withStore { store, _ in
            let session = try await store.newSession()
            let start = ContinuousClock.now
            for seq in 1...20 as ClosedRange<UInt64> {
                try await store.appendOutbound(session: session.id, seq: seq, payload: bytes("x"), on: testLoop).get()
            }
            // No timer holds a lone operation back waiting for others: each one was
            // its own commit. (Wall time is printed, not asserted: under a parallel
            // test run on two cores it measures the scheduler, not the store.)
            print("20 sequential single-operation commits took \(ContinuousClock.now - start)")
            #expect(store.statistics.largestBatch == 1)
            #expect(store.statistics.commits == 21)  // the session, then the 20 appends
        }
    }

    @Test func submissionsOfOneLoopTurn_commitAsOneTransaction() async throws {
        try await withStore { store, _ in
            let session = try await store.newSession()
            // As the daemon does when one read brings a server's ACK and the echoed DATA:
            // several submissions from the loop in one turn. The first must not commit alone.
            #expect(try await commitsOfAppendsInOneLoopTurn(store, session: session.id, seqs: 1...3) == 1)
            #expect(try await store.session(session.id, on: testLoop).get()?.sentSeq == 3)
        }
    }

    @Test func batchSize_isBoundedByTheConfiguration() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try await AgentStore.open(StoreConfiguration(path: directory.databasePath, maximumBatchOperations: 100),
                                              on: testLoop).get()
        let session = try await store.newSession()
        try await submitAll(store, (1...1000 as ClosedRange<UInt64>).map {
            .appendOutbound(session: session.id, seq: $0, payload: bytes("x"), expiresAtMS: nil)
        })
        #expect(store.statistics.largestBatch <= 100)
        #expect(store.statistics.commits >= 11)
        try await store.close(on: testLoop).get()
    }
}
