import AgentStore
import SQLiteDatabase
import Testing

@Suite("Schema migrations")
struct MigrationTests {
    @Test func createsEveryTable_fromAnEmptyFile() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try await reopen(directory.databasePath) { _ in }

        let database = try SQLiteDatabase(path: directory.databasePath)
        #expect(try database.userVersion == 4)
        #expect(try database.queryText("PRAGMA journal_mode") == "wal")
        let tables = try database.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        var names: [String] = []
        while try tables.step() { names.append(tables.text(at: 0) ?? "") }
        #expect(names == ["inbox", "metadata", "outbox", "sessions"])
    }

    @Test func reopeningACurrentDatabase_changesNothing() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try await reopen(directory.databasePath) { store async throws in
            try await store.setMetadata("agent-1", forKey: "agent_id", on: testLoop).get()
        }
        try await reopen(directory.databasePath) { store async throws in
            #expect(try await store.metadata(forKey: "agent_id", on: testLoop).get() == "agent-1")
        }
        #expect(try SQLiteDatabase(path: directory.databasePath).userVersion == 4)
    }

    @Test func refusesADatabaseFromANewerVersion_withAClearMessage() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try SQLiteDatabase(path: directory.databasePath).setUserVersion(99)

        let error = await #expect(throws: StoreError.self) {
            try await AgentStore.open(StoreConfiguration(path: directory.databasePath), on: testLoop).get()
        }
        #expect(error == .schemaTooNew(found: 99, supported: 4, path: directory.databasePath))
        #expect(error?.description.contains("run a newer imagentd or move the database aside") == true)
        // Refused without touching it.
        #expect(try SQLiteDatabase(path: directory.databasePath).userVersion == 99)
    }

    @Test func refusesAFileThatIsNotADatabase() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try String(repeating: "not a database ", count: 100).write(toFile: directory.databasePath, atomically: true, encoding: .utf8)
        let error = await #expect(throws: StoreError.self) {
            try await AgentStore.open(StoreConfiguration(path: directory.databasePath), on: testLoop).get()
        }
        guard case .corrupt = error else {
            Issue.record("expected .corrupt, got \(String(describing: error))")
            return
        }
    }
}
