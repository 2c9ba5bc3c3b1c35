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
        #expect(try database.userVersion == 5)
        #expect(try database.queryText("PRAGMA journal_mode") == "wal")
        let tables = try database.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        var names: [String] = []
        while try tables.step() { names.append(tables.text(at: 0) ?? "") }
        #expect(names == ["inbox", "outbox", "sessions"])
    }

    @Test func reopeningACurrentDatabase_changesNothing() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try await reopen(directory.databasePath) { store async throws in
            let record = try await store.createSession(service: "echo", ownerUID: 1, createdAtMS: 0, on: testLoop).get()
            try await store.appendOutbound(session: record.id, seq: 1, payload: bytes("kept"), on: testLoop).get()
        }
        try await reopen(directory.databasePath) { store async throws in
            let sessions = try await store.load(on: testLoop).get().sessions
            #expect(sessions.map(\.outbox.count) == [1])
        }
        #expect(try SQLiteDatabase(path: directory.databasePath).userVersion == 5)
    }

    @Test func refusesADatabaseFromANewerVersion_withAClearMessage() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try SQLiteDatabase(path: directory.databasePath).setUserVersion(99)

        let error = await #expect(throws: StoreError.self) {
            try await AgentStore.open(StoreConfiguration(path: directory.databasePath), on: testLoop).get()
        }
        #expect(error == .schemaTooNew(found: 99, supported: 5, path: directory.databasePath))
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
