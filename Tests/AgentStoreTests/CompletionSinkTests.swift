import AgentStore
import IMAgentTestKit
import NIOConcurrencyHelpers
import NIOCore
import Testing

@Suite("Outcomes through a completion sink")
struct CompletionSinkTests {
    /// Records each call as one line per outcome ("tag ok" / "tag <error>"), and futures' completions beside them.
    final class Recorder: StoreCompletionSink, Sendable {
        let calls = NIOLockedValueBox<[[String]]>([])

        func storeCompleted(_ completions: [StoreCompletion]) {
            calls.withLockedValue { calls in
                calls.append(completions.map { completion in
                    switch completion.outcome {
                    case .success: "\(completion.tag) ok"
                    case .failure(let error): "\(completion.tag) \(error)"
                    }
                })
            }
        }

        func note(_ line: String) { calls.withLockedValue { $0.append([line]) } }

        /// Waits until `count` outcomes and notes are recorded (at most 10 s); every call.
        func wait(for count: Int) async throws -> [[String]] {
            let enough = try await poll(within: .seconds(10), every: .milliseconds(5)) { () -> [[String]]? in
                let calls = calls.withLockedValue { $0 }
                return calls.joined().count >= count ? calls : nil
            }
            return enough ?? calls.withLockedValue { $0 }
        }
    }

    @Test func oneLoopTurnsSubmissions_arriveInOneCall_inOrder_eachWithItsOwnOutcome() async throws {
        try await withStore { store, _ in
            let session = try await store.newSession()
            let recorder = Recorder()
            let before = store.statistics.commits
            try await testLoop.submit {
                store.submit(.appendOutbound(session: session.id, seq: 1, payload: bytes("a"), expiresAtMS: nil), tag: 10,
                             on: testLoop, to: recorder)
                // Breaks a rule (seq 1 again): fails alone, the others of the commit stand.
                store.submit(.appendOutbound(session: session.id, seq: 1, payload: bytes("b"), expiresAtMS: nil), tag: 11,
                             on: testLoop, to: recorder)
                store.submit(.appendOutbound(session: session.id, seq: 2, payload: bytes("c"), expiresAtMS: nil), tag: 12,
                             on: testLoop, to: recorder)
            }.get()
            let calls = try await recorder.wait(for: 3)
            #expect(calls.count == 1, "one call per commit: \(calls)")
            let outcomes = Array(calls.joined())
            #expect(outcomes.count == 3)
            #expect(outcomes.first == "10 ok")
            #expect(outcomes.dropFirst().first?.hasPrefix("11 ") == true && outcomes.dropFirst().first != "11 ok", "\(outcomes)")
            #expect(outcomes.last == "12 ok")
            #expect(store.statistics.commits - before == 1)
            #expect(try await store.session(session.id, on: testLoop).get()?.sentSeq == 2)
        }
    }

    @Test func sinkOutcomesAndFutures_keepSubmissionOrder() async throws {
        try await withStore { store, _ in
            let session = try await store.newSession()
            let recorder = Recorder()
            try await testLoop.submit {
                store.submit(.appendOutbound(session: session.id, seq: 1, payload: bytes("a"), expiresAtMS: nil), tag: 1,
                             on: testLoop, to: recorder)
                store.submit(.appendOutbound(session: session.id, seq: 2, payload: bytes("b"), expiresAtMS: nil), tag: 2,
                             on: testLoop, to: recorder)
                store.outbound(session: session.id, after: 0, limit: 10, on: testLoop).whenSuccess { messages in
                    recorder.note("read \(messages.map(\.seq))")
                }
                store.submit(.markAcked(session: session.id, upTo: 2), tag: 3, on: testLoop, to: recorder)
            }.get()
            let calls = try await recorder.wait(for: 4)
            #expect(calls == [["1 ok", "2 ok"], ["read [1, 2]"], ["3 ok"]])
        }
    }

    @Test func aSubmissionToAClosedStore_failsThroughTheSink() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try await AgentStore.open(StoreConfiguration(path: directory.databasePath), on: testLoop).get()
        try await store.close(on: testLoop).get()
        let recorder = Recorder()
        store.submit(.markAcked(session: 1, upTo: 1), tag: 7, on: testLoop, to: recorder)
        #expect(try await recorder.wait(for: 1) == [["7 \(StoreError.closed)"]])
    }
}
