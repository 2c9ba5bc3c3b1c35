import AgentStore
import NIOCore
import Testing

@Suite("Outbox and inbox")
struct QueueTests {
    @Test func markAcked_deletesExactlyTheAcknowledgedOutboundRows() async throws {
        try await withStore { store, _ in
            let session = try await store.newSession()
            let other = try await store.newSession()
            for seq in 1...10 as ClosedRange<UInt64> {
                try await store.appendOutbound(session: session.id, seq: seq, payload: bytes("\(seq)"), on: testLoop).get()
                try await store.appendOutbound(session: other.id, seq: seq, payload: bytes("\(seq)"), on: testLoop).get()
            }
            try await store.markAcked(session: session.id, upTo: 4, on: testLoop).get()
            #expect(try await store.outbound(session: session.id, after: 0, limit: 100, on: testLoop).get().map(\.seq) == Array(5...10))
            #expect(try await store.outbound(session: other.id, after: 0, limit: 100, on: testLoop).get().count == 10)
            // An old or repeated ACK changes nothing.
            try await store.markAcked(session: session.id, upTo: 3, on: testLoop).get()
            try await store.markAcked(session: session.id, upTo: 4, on: testLoop).get()
            let record = try #require(try await store.session(session.id, on: testLoop).get())
            #expect(record.ackedSeq == 4 && record.sentSeq == 10)
            // Paging from where the server said it stands.
            #expect(try await store.outbound(session: session.id, after: 6, limit: 2, on: testLoop).get().map(\.seq) == [7, 8])
            // An ACK beyond what was ever stored is a bug upstream.
            await #expect(throws: StoreError.ackBeyondStored(session: session.id, seq: 11, highest: 10, direction: .outbound)) {
                try await store.markAcked(session: session.id, upTo: 11, on: testLoop).get()
            }
        }
    }

    @Test func giveUpExpiredOutbound_takesOneSessionsExpiredRowsAfterASeq_inBatches_andCountsThem() async throws {
        try await withStore { store, _ in
            let session = try await store.newSession()
            let other = try await store.newSession()
            // Seqs 1…8; even seqs expire at 100 + seq, odd ones never; the other session's all at 50.
            for seq in 1...8 as ClosedRange<UInt64> {
                try await store.appendOutbound(session: session.id, seq: seq, payload: bytes("m\(seq)"),
                                               expiresAtMS: seq % 2 == 0 ? 100 + Int64(seq) : nil, on: testLoop).get()
                try await store.appendOutbound(session: other.id, seq: seq, payload: bytes("x"), expiresAtMS: 50, on: testLoop).get()
            }
            // After seq 2 (the window), by 106: seqs 4 and 6, one batch of at most 1 first.
            let first = try await store.giveUpExpiredOutbound(session: session.id, after: 2, nowMS: 106, limit: 1, on: testLoop).get()
            #expect(first.messages == [OutboundIndexEntry(seq: 4, bytes: 2, expiresAtMS: 104)])
            #expect(first.nextExpiryMS == 106)
            let second = try await store.giveUpExpiredOutbound(session: session.id, after: 2, nowMS: 106, limit: 10, on: testLoop).get()
            #expect(second.messages.map(\.seq) == [6])
            #expect(second.nextExpiryMS == 108)
            #expect(try await store.outbound(session: session.id, after: 0, limit: 100, on: testLoop).get().map(\.seq) == [1, 2, 3, 5, 7, 8])
            #expect(try await store.outbound(session: other.id, after: 0, limit: 100, on: testLoop).get().count == 8)
            let index = try await store.loadIndex(on: testLoop).get()
            let indexed = try #require(index.sessions.first { $0.record.id == session.id })
            #expect(indexed.record.givenUp == 2)
            #expect(indexed.outboxCount == 6 && indexed.outboxBytes == 12 && indexed.outboxEarliestExpiryMS == 102)
        }
    }

    @Test func outboundSpan_countsTheFirstRowsAfterASeq_acrossGaps() async throws {
        try await withStore { store, _ in
            let session = try await store.newSession()
            for seq in 1...6 as ClosedRange<UInt64> {
                try await store.appendOutbound(session: session.id, seq: seq, payload: bytes(String(repeating: "x", count: Int(seq))),
                                               on: testLoop).get()
            }
            try await store.giveUpOutbound(session: session.id, seq: 3, on: testLoop).get()
            #expect(try await store.outboundSpan(session: session.id, after: 1, count: 3, on: testLoop).get()
                == OutboundSpan(count: 3, lastSeq: 5, bytes: 2 + 4 + 5))
            #expect(try await store.outboundSpan(session: session.id, after: 5, count: 3, on: testLoop).get()
                == OutboundSpan(count: 1, lastSeq: 6, bytes: 6))
        }
    }

    @Test func markDelivered_deletesExactlyTheAcknowledgedInboundRows() async throws {
        try await withStore { store, _ in
            let session = try await store.newSession()
            for seq in 1...6 as ClosedRange<UInt64> {
                try await store.appendInbound(session: session.id, seq: seq, payload: bytes("m\(seq)"), on: testLoop).get()
            }
            try await store.markDelivered(session: session.id, upTo: 2, on: testLoop).get()
            let rest = try await store.inbound(session: session.id, after: 2, limit: 100, on: testLoop).get()
            #expect(rest == (3...6).map { InboundMessage(seq: $0, payload: bytes("m\($0)")) })
            #expect(try await store.inbound(session: session.id, after: 0, limit: 100, on: testLoop).get().first?.seq == 3)
            let record = try #require(try await store.session(session.id, on: testLoop).get())
            #expect(record.receivedSeq == 6 && record.deliveredSeq == 2)
            await #expect(throws: StoreError.ackBeyondStored(session: session.id, seq: 7, highest: 6, direction: .inbound)) {
                try await store.markDelivered(session: session.id, upTo: 7, on: testLoop).get()
            }
        }
    }

    @Test func duplicateAndGappedSeqs_areRefused_withTheNumbers() async throws {
        try await withStore { store, _ in
            let session = try await store.newSession()
            try await store.appendOutbound(session: session.id, seq: 1, payload: bytes("a"), on: testLoop).get()
            try await store.appendOutbound(session: session.id, seq: 2, payload: bytes("b"), on: testLoop).get()
            try await store.markAcked(session: session.id, upTo: 2, on: testLoop).get()
            // Seq 1 is no longer in the outbox, but it was assigned: still a duplicate.
            await #expect(throws: StoreError.duplicateSeq(session: session.id, seq: 1, highest: 2, direction: .outbound)) {
                try await store.appendOutbound(session: session.id, seq: 1, payload: bytes("again"), on: testLoop).get()
            }
            await #expect(throws: StoreError.seqGap(session: session.id, seq: 4, highest: 2, direction: .outbound)) {
                try await store.appendOutbound(session: session.id, seq: 4, payload: bytes("gap"), on: testLoop).get()
            }
            try await store.appendInbound(session: session.id, seq: 1, payload: bytes("x"), on: testLoop).get()
            await #expect(throws: StoreError.duplicateSeq(session: session.id, seq: 1, highest: 1, direction: .inbound)) {
                try await store.appendInbound(session: session.id, seq: 1, payload: bytes("x"), on: testLoop).get()
            }
            await #expect(throws: StoreError.unknownSession(77)) {
                try await store.appendInbound(session: 77, seq: 1, payload: bytes("x"), on: testLoop).get()
            }
            let record = try #require(try await store.session(session.id, on: testLoop).get())
            #expect(record.sentSeq == 2 && record.receivedSeq == 1)
        }
    }

    @Test func aSubmission_isAllOrNothing_andItsFailureSparesTheRestOfTheBatch() async throws {
        try await withStore { store, _ in
            let session = try await store.newSession()
            // Submitted together, so they share one transaction.
            let good = store.perform([.appendOutbound(session: session.id, seq: 1, payload: bytes("1"), expiresAtMS: nil),
                                      .appendInbound(session: session.id, seq: 1, payload: bytes("1"))], on: testLoop)
            let bad = store.perform([.appendOutbound(session: session.id, seq: 2, payload: bytes("2"), expiresAtMS: nil),
                                     .appendInbound(session: session.id, seq: 5, payload: bytes("gap"))], on: testLoop)
            let after = store.perform([.appendOutbound(session: session.id, seq: 2, payload: bytes("2"), expiresAtMS: nil)],
                                      on: testLoop)
            #expect(try await good.get() == [.done, .done])
            await #expect(throws: StoreError.seqGap(session: session.id, seq: 5, highest: 1, direction: .inbound)) {
                try await bad.get()
            }
            // The bad submission's first operation was rolled back with it, so seq 2 is free.
            #expect(try await after.get() == [.done])
            let record = try #require(try await store.session(session.id, on: testLoop).get())
            #expect(record.sentSeq == 2 && record.receivedSeq == 1)
            #expect(try await store.outbound(session: session.id, after: 0, limit: 10, on: testLoop).get().map(\.payload)
                == [bytes("1"), bytes("2")])
        }
    }

    @Test func cachedCounters_reachTheRowAtCommit_andARolledBackSubmissionLeavesThemAsBefore() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.databasePath
        let id = try await reopen(path) { store in
            let session = try await store.newSession()
            // One batch: appends and acknowledgements in both directions, and a failing
            // submission in the middle whose first operation must not move sent_seq.
            let futures = [
                store.perform([.appendOutbound(session: session.id, seq: 1, payload: bytes("1"), expiresAtMS: nil)], on: testLoop),
                store.perform([.appendOutbound(session: session.id, seq: 2, payload: bytes("2"), expiresAtMS: nil)], on: testLoop),
                store.perform([.appendOutbound(session: session.id, seq: 3, payload: bytes("3"), expiresAtMS: nil),
                               .markAcked(session: session.id, upTo: 9)], on: testLoop),
                store.perform([.appendInbound(session: session.id, seq: 1, payload: bytes("a"))], on: testLoop),
                store.perform([.markAcked(session: session.id, upTo: 1)], on: testLoop),
                store.perform([.markDelivered(session: session.id, upTo: 1)], on: testLoop),
            ]
            for (index, future) in futures.enumerated() {
                if index == 2 {
                    await #expect(throws: StoreError.self) { try await future.get() }
                } else {
                    _ = try await future.get()
                }
            }
            // Read back in the same transaction as a write, before its commit.
            let read = try await store.perform([.appendOutbound(session: session.id, seq: 3, payload: bytes("3"), expiresAtMS: nil),
                                                .session(session.id)], on: testLoop).get()
            guard case .sessionRecord(let record?) = read[1] else { Issue.record("no record: \(read)"); return session.id }
            #expect([record.sentSeq, record.ackedSeq, record.receivedSeq, record.deliveredSeq] == [3, 1, 1, 1])
            return session.id
        }
        // A restarted store reads the rows only.
        let record = try await reopen(path) { try await $0.session(id, on: testLoop).get() }
        #expect([record?.sentSeq, record?.ackedSeq, record?.receivedSeq, record?.deliveredSeq] == [3, 1, 1, 1])
    }

    @Test func emptyAndLargePayloads_roundTrip() async throws {
        try await withStore { store, _ in
            let session = try await store.newSession()
            let large = payloadOf(size: 256 * 1024, seq: 9)
            try await store.appendOutbound(session: session.id, seq: 1, payload: ByteBuffer(), on: testLoop).get()
            try await store.appendOutbound(session: session.id, seq: 2, payload: large, on: testLoop).get()
            let stored = try await store.outbound(session: session.id, after: 0, limit: 10, on: testLoop).get()
            #expect(stored.map(\.payload) == [ByteBuffer(), large])
        }
    }
}
