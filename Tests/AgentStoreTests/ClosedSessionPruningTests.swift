import AgentStore
import NIOCore
import Testing

/// An OPEN/CLOSE loop must not grow the file: rows of closed sessions are kept
/// only for the newest `StoreLimits.closedSessionsKept`.
@Suite("Closed sessions are pruned")
struct ClosedSessionPruningTests {
    @Test func anOpenCloseLoop_keepsOnlyTheNewestClosedRows() async throws {
        try await withStore { store, _ in
            let total = StoreLimits.closedSessionsKept + 2 * StoreLimits.closedSessionsPruneEvery
            let open = try await store.newSession(service: "stays-open")
            for batch in stride(from: 1, through: total, by: 500) {
                var operations: [StoreOperation] = []
                for id in batch..<(batch + 500) {
                    operations.append(.createSession(id: UInt64(id), service: "loop", ownerUID: 1000, priority: 1, durable: true,
                                                     createdAtMS: Int64(id)))
                    operations.append(.closeSession(UInt64(id)))
                }
                _ = try await store.perform(operations, on: testLoop).get()
            }
            let snapshot = try await store.load(on: testLoop).get()
            let closed = snapshot.sessions.filter { $0.record.state == .closed }.map(\.record.id)
            #expect(closed.count == StoreLimits.closedSessionsKept, "\(closed.count) closed rows after \(total) closes")
            #expect(closed.min() == UInt64(total - StoreLimits.closedSessionsKept + 1), "the oldest go first")
            #expect(snapshot.sessions.contains { $0.record.id == open.id && $0.record.state == .open }, "open sessions stay")
            // A kept closed id is still refused.
            await #expect(throws: (any Error).self) {
                try await store.createSession(id: UInt64(total), service: "again", ownerUID: 1, createdAtMS: 0, on: testLoop).get()
            }
        }
    }
}
