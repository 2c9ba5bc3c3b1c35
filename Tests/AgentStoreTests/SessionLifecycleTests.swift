import AgentStore
import NIOCore
import Testing

@Suite("Sessions")
struct SessionLifecycleTests {
    @Test func createdSession_startsOpenWithZeroCounters() async throws {
        try await withStore { store, _ in
            let record = try await store.createSession(service: "echo", ownerUID: 1000, priority: 0, durable: false,
                                                       createdAtMS: 1234, on: testLoop).get()
            #expect(record.id != 0)
            #expect(record == SessionRecord(id: record.id, service: "echo", ownerUID: 1000, priority: 0, durable: false,
                                            state: .open, createdMS: 1234))
            #expect(try await store.session(record.id, on: testLoop).get() == record)
            #expect(try await store.session(record.id &+ 1, on: testLoop).get() == nil)
        }
    }

    @Test func reopen_keepsSessionsCountersQueuesAndMetadata() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (first, second) = try await reopen(directory.databasePath) { store in
            let first = try await store.newSession(service: "echo", owner: 1000)
            let second = try await store.newSession(service: "push", owner: 0)
            for seq in 1...5 as ClosedRange<UInt64> {
                try await store.appendOutbound(session: first.id, seq: seq, payload: bytes("out \(seq)"),
                                               expiresAtMS: seq == 5 ? 9_999 : nil, on: testLoop).get()
                try await store.appendInbound(session: first.id, seq: seq, payload: bytes("in \(seq)"), on: testLoop).get()
            }
            try await store.markAcked(session: first.id, upTo: 2, on: testLoop).get()
            try await store.markDelivered(session: first.id, upTo: 3, on: testLoop).get()
            try await store.failSession(second.id, code: 10, on: testLoop).get()
            return (first, second)
        }

        let snapshot = try await reopen(directory.databasePath) { store in try await store.load(on: testLoop).get() }
        let sessions = Dictionary(uniqueKeysWithValues: snapshot.sessions.map { ($0.record.id, $0) })
        let echo = try #require(sessions[first.id])
        #expect(echo.record.service == "echo" && echo.record.ownerUID == 1000 && echo.record.state == .open)
        #expect(echo.record.sentSeq == 5 && echo.record.ackedSeq == 2)
        #expect(echo.record.receivedSeq == 5 && echo.record.deliveredSeq == 3)
        #expect(echo.outbox == [
            OutboundMessage(seq: 3, payload: bytes("out 3")),
            OutboundMessage(seq: 4, payload: bytes("out 4")),
            OutboundMessage(seq: 5, payload: bytes("out 5"), expiresAtMS: 9_999),
        ])
        #expect(echo.inbox == [InboundMessage(seq: 4, payload: bytes("in 4")), InboundMessage(seq: 5, payload: bytes("in 5"))])
        let push = try #require(sessions[second.id])
        #expect(push.record.state == .failed && push.record.failureCode == 10)
        #expect(push.outbox.isEmpty && push.inbox.isEmpty)
    }

    @Test func closeSession_purgesBothQueues_andKeepsTheIDReserved() async throws {
        try await withStore { store, _ in
            let session = try await store.newSession()
            let other = try await store.newSession()
            for seq in 1...3 as ClosedRange<UInt64> {
                try await store.appendOutbound(session: session.id, seq: seq, payload: bytes("o"), on: testLoop).get()
                try await store.appendInbound(session: session.id, seq: seq, payload: bytes("i"), on: testLoop).get()
                try await store.appendOutbound(session: other.id, seq: seq, payload: bytes("o"), on: testLoop).get()
            }
            try await store.closeSession(session.id, on: testLoop).get()

            let snapshot = try await store.load(on: testLoop).get()
            let closed = try #require(snapshot.sessions.first { $0.record.id == session.id })
            #expect(closed.record.state == .closed)
            #expect(closed.outbox.isEmpty && closed.inbox.isEmpty)
            #expect(snapshot.sessions.first { $0.record.id == other.id }?.outbox.count == 3)

            // Nothing new on a closed session, and its id cannot be taken again.
            await #expect(throws: StoreError.sessionNotOpen(session.id, .closed)) {
                try await store.appendOutbound(session: session.id, seq: 4, payload: bytes("late"), on: testLoop).get()
            }
            await #expect(throws: StoreError.sessionExists(session.id)) {
                try await store.createSession(id: session.id, service: "echo", ownerUID: 1, createdAtMS: 0, on: testLoop).get()
            }
            // A late OPEN_FAIL does not reopen a closed session as failed.
            try await store.failSession(session.id, code: 10, on: testLoop).get()
            #expect(try await store.session(session.id, on: testLoop).get()?.state == .closed)
        }
    }

    @Test func sessionIDs_neverRepeat_acrossReopen() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var seen = Set<UInt64>()
        for round in 0..<3 {
            let ids = try await reopen(directory.databasePath) { store in
                var ids: [UInt64] = []
                for index in 0..<200 {
                    let record = try await store.newSession()
                    ids.append(record.id)
                    if index % 2 == 0 { try await store.closeSession(record.id, on: testLoop).get() }
                }
                return ids
            }
            #expect(ids.allSatisfy { $0 != 0 }, "round \(round)")
            for id in ids {
                #expect(seen.insert(id).inserted, "id \(id) handed out twice (round \(round))")
            }
        }
        let sessions = try await reopen(directory.databasePath) { store in try await store.load(on: testLoop).get().sessions }
        #expect(sessions.count == 600)
    }

    @Test func aDrawnID_canBeCreatedOnce() async throws {
        try await withStore { store, _ in
            let id = try await store.createSession(service: "echo", ownerUID: 5, createdAtMS: 0, on: testLoop).get().id
            await #expect(throws: StoreError.sessionExists(id)) {
                try await store.createSession(id: id, service: "echo", ownerUID: 5, createdAtMS: 0, on: testLoop).get()
            }
        }
    }

    @Test func sessionIDs_coverTheWholeUInt64Range_asTheirBitPattern() async throws {
        try await withStore { store, _ in
            let high: UInt64 = 0xFFFF_FFFF_FFFF_FFFE
            let record = try await store.createSession(id: high, service: "echo", ownerUID: 1, createdAtMS: 0, on: testLoop).get()
            #expect(record.id == high)
            try await store.appendOutbound(session: high, seq: 1, payload: bytes("x"), on: testLoop).get()
            #expect(try await store.session(high, on: testLoop).get()?.sentSeq == 1)
            #expect(try await store.load(on: testLoop).get().sessions.map(\.record.id) == [high])
        }
    }

    @Test func operationsAfterClose_failWithClosed() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try await AgentStore.open(StoreConfiguration(path: directory.databasePath), on: testLoop).get()
        let session = try await store.newSession()
        // Queued before close: still committed.
        let queued = store.appendOutbound(session: session.id, seq: 1, payload: bytes("x"), on: testLoop)
        try await store.close(on: testLoop).get()
        try await queued.get()
        await #expect(throws: StoreError.closed) {
            try await store.appendOutbound(session: session.id, seq: 2, payload: bytes("y"), on: testLoop).get()
        }
        try await store.close(on: testLoop).get()
        #expect(try await reopen(directory.databasePath) { try await $0.session(session.id, on: testLoop).get()?.sentSeq } == 1)
    }
}
