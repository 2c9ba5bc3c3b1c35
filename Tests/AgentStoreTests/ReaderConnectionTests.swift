import AgentStore
import NIOCore
import Testing

/// `readOutbound`/`readInbound` run on the second, read-only connection (`StoreReader`):
/// they must see every row whose commit completed before the call, and stay exact
/// while the writer appends and deletes acknowledged ranges at the same time.
@Suite("Reads on the reader connection")
struct ReaderConnectionTests {
    @Test func aReadSeesEveryCommittedRow_withTheWritersLimits() async throws {
        try await withStore { store, _ in
            let session = try await store.newSession()
            for seq in 1...6 as ClosedRange<UInt64> {
                try await store.appendOutbound(session: session.id, seq: seq, payload: payloadOf(size: 100, seq: seq),
                                               expiresAtMS: seq == 3 ? 5_000 : nil, on: testLoop).get()
                try await store.appendInbound(session: session.id, seq: seq, payload: payloadOf(size: 10, seq: seq), on: testLoop).get()
            }
            let outbound = try await store.readOutbound(session: session.id, after: 1, limit: 10, on: testLoop).get()
            #expect(outbound == (try await store.outbound(session: session.id, after: 1, limit: 10, on: testLoop).get()))
            #expect(outbound.map(\.seq) == [2, 3, 4, 5, 6] && outbound[1].expiresAtMS == 5_000)
            #expect(outbound[0].payload == payloadOf(size: 100, seq: 2))
            // At most maxBytes, but at least one message; and at most limit.
            #expect(try await store.readOutbound(session: session.id, after: 0, limit: 10, maxBytes: 250, on: testLoop).get().map(\.seq) == [1, 2])
            #expect(try await store.readOutbound(session: session.id, after: 0, limit: 10, maxBytes: 1, on: testLoop).get().map(\.seq) == [1])
            #expect(try await store.readInbound(session: session.id, after: 4, limit: 1, on: testLoop).get()
                == [InboundMessage(seq: 5, payload: payloadOf(size: 10, seq: 5))])
            // A deletion whose commit completed is seen too.
            try await store.markAcked(session: session.id, upTo: 4, on: testLoop).get()
            try await store.markDelivered(session: session.id, upTo: 6, on: testLoop).get()
            #expect(try await store.readOutbound(session: session.id, after: 0, limit: 10, on: testLoop).get().map(\.seq) == [5, 6])
            #expect(try await store.readInbound(session: session.id, after: 0, limit: 10, on: testLoop).get().isEmpty)
        }
    }

    /// The daemon's pattern during a drain: append, and once the append committed read the
    /// range after what it already holds, while ACKs delete the ranges below it. Each read
    /// must start exactly after `after`, be gapless, hold the right payloads, and reach at
    /// least the last seq committed before it was issued.
    @Test func readsAfterTheWindow_stayExact_whileTheWriterAppendsAndDeletesBelowIt() async throws {
        try await withStore { store, _ in
            let session = try await store.newSession()
            let total: UInt64 = 2_000
            var committed: UInt64 = 0
            var loaded: UInt64 = 0
            var acked: UInt64 = 0
            var appends: [EventLoopFuture<Void>] = []
            while loaded < total {
                // What was appended in the last round has committed once its futures completed.
                try await EventLoopFuture.andAllSucceed(appends, on: testLoop).get()
                committed = min(total, committed + UInt64(appends.count))
                appends = []
                // The next round's appends, committing while the read below runs.
                let upTo = min(total, committed + 37)
                if committed < upTo {
                    for seq in committed + 1...upTo {
                        appends.append(store.appendOutbound(session: session.id, seq: seq,
                                                            payload: payloadOf(size: 16 * 1024, seq: seq), on: testLoop))
                    }
                }
                // The read and an ACK of half the loaded range, issued together.
                let ack = store.markAcked(session: session.id, upTo: max(acked, loaded / 2), on: testLoop)
                let knownCommitted = committed
                let messages = try await store.readOutbound(session: session.id, after: loaded, limit: 64, on: testLoop).get()
                try await ack.get()
                acked = max(acked, loaded / 2)
                let seqs = messages.map(\.seq)
                #expect(seqs == Array(loaded + 1..<loaded + 1 + UInt64(seqs.count)), "a gap or a stale row after \(loaded)")
                #expect(seqs.count == 64 || (seqs.last ?? loaded) >= knownCommitted,
                        "a committed row missing: read up to \(seqs.last ?? loaded), committed \(knownCommitted)")
                for message in messages where message.payload != payloadOf(size: 16 * 1024, seq: message.seq) {
                    Issue.record("seq \(message.seq): wrong payload")
                }
                loaded = seqs.last ?? loaded
            }
            try await EventLoopFuture.andAllSucceed(appends, on: testLoop).get()
            #expect(loaded == total && acked > 0)
        }
    }

    @Test func aReadAfterClose_failsWithClosed() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try await AgentStore.open(StoreConfiguration(path: directory.databasePath), on: testLoop).get()
        let session = try await store.newSession()
        try await store.close(on: testLoop).get()
        await #expect(throws: StoreError.closed) {
            try await store.readOutbound(session: session.id, after: 0, limit: 1, on: testLoop).get()
        }
    }
}
