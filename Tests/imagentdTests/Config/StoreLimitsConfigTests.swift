import Testing

@testable import IMAgentCore

/// `[store] memory_budget_bytes`, `[store] max_bytes` and the byte limits of `[limits]` (issue 10).
@Suite struct StoreLimitsConfigTests {
    @Test func defaults_areAnEightMiBBudget_halfTheFileSystem_andGiBLimits() throws {
        let c = try ConfigLoader.load(text: "", file: "f")
        #expect(c.store.memoryBudgetBytes == 8 << 20)
        #expect(c.store.maxBytes == nil)  // half the file system, decided when the store opens
        #expect(c.limits.outboxBytes == 1 << 30)
        #expect(c.limits.uidOutboxBytes == 4 << 30)
        #expect(SessionLimits(c).memoryBudgetBytes == 8 << 20)
    }

    @Test func keysAreRead_andReachTheRouter() throws {
        let c = try ConfigLoader.load(text: """
            [store]
            memory_budget_bytes = 1048576
            max_bytes = 104857600
            [limits]
            outbox_bytes = 5000000
            uid_outbox_bytes = 9000000
            """, file: "f")
        #expect(c.store.memoryBudgetBytes == 1 << 20)
        #expect(c.store.maxBytes == 100 << 20)
        let limits = SessionLimits(c)
        #expect(limits.memoryBudgetBytes == 1 << 20 && limits.outboxBytes == 5_000_000 && limits.uidOutboxBytes == 9_000_000)
    }

    @Test func aBudgetBelow64KiB_isRefusedWithItsLine() {
        #expect(throws: ConfigProblems.self) { _ = try ConfigLoader.load(text: "[store]\nmemory_budget_bytes = 1000", file: "f") }
    }

    @Test func theDefaultStoreCap_isHalfTheFileSystem() {
        let cap = SQLiteSessionPersistence.defaultMaxBytes(directory: "/tmp")
        #expect((cap ?? 0) > 0)
    }
}
