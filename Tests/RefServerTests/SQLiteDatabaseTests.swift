import Foundation
import SQLiteDatabase
import Testing

@Suite("SQLiteDatabase")
struct SQLiteDatabaseTests {
    func withDatabase(_ body: (SQLiteDatabase, String) throws -> Void) throws {
        let environment = try TestEnvironment.make()
        defer { environment.remove() }
        let path = environment.directory + "/test.sqlite"
        try body(try SQLiteDatabase(path: path, synchronous: .full), path)
    }

    @Test func opensInWALMode_andRoundTripsEveryType() throws {
        try withDatabase { database, _ in
            #expect(try database.queryText("PRAGMA journal_mode") == "wal")
            #expect(try database.queryInteger("PRAGMA synchronous") == 2)
            try database.execute("CREATE TABLE t(i INTEGER, s TEXT, b BLOB, n TEXT)")
            let insert = try database.prepare("INSERT INTO t VALUES(?, ?, ?, ?)")
            try insert.run([.integer(Int64.min), .text("héllo"), .blob([0, 1, 255]), .null])
            try insert.run([.integer(7), .text(""), .blob([]), .null])
            #expect(database.changes == 1)

            let select = try database.prepare("SELECT i, s, b, n FROM t ORDER BY rowid")
            #expect(try select.step())
            #expect(select.integer(at: 0) == Int64.min)
            #expect(select.text(at: 1) == "héllo")
            #expect(select.blob(at: 2) == [0, 1, 255])
            #expect(select.isNull(at: 3))
            #expect(select.value(at: 3) == .null)
            #expect(try select.step())
            #expect(select.value(at: 1) == .text(""))
            #expect(select.blob(at: 2) == [])
            #expect(try !select.step())
        }
    }

    @Test func transaction_rollsBackWhenTheBodyThrows() throws {
        struct Abort: Error {}
        try withDatabase { database, _ in
            try database.execute("CREATE TABLE t(i INTEGER)")
            try database.transaction { try database.execute("INSERT INTO t VALUES(1)") }
            #expect(throws: Abort.self) {
                try database.transaction {
                    try database.execute("INSERT INTO t VALUES(2)")
                    throw Abort()
                }
            }
            #expect(try database.queryInteger("SELECT count(*) FROM t") == 1)
        }
    }

    @Test func errors_carrySQLitesMessageAndContext() throws {
        try withDatabase { database, _ in
            let error = #expect(throws: SQLiteError.self) { try database.prepare("SELEKT 1") }
            #expect(error?.message.contains("syntax error") == true)
            #expect(error?.description.contains("prepare SELEKT 1") == true)
            try database.execute("CREATE TABLE u(i INTEGER PRIMARY KEY)")
            try database.execute("INSERT INTO u VALUES(1)")
            let constraint = #expect(throws: SQLiteError.self) { try database.execute("INSERT INTO u VALUES(1)") }
            #expect(constraint?.primaryCode == 19)  // SQLITE_CONSTRAINT
        }
        #expect(throws: SQLiteError.self) { try SQLiteDatabase(path: "/nonexistent-dir/x.sqlite") }
    }

    @Test func committedData_survivesReopening() throws {
        try withDatabase { database, path in
            try database.execute("CREATE TABLE t(i INTEGER)")
            try database.transaction { try database.execute("INSERT INTO t VALUES(42)") }
            let reopened = try SQLiteDatabase(path: path)
            #expect(try reopened.queryInteger("SELECT i FROM t") == 42)
        }
    }
}
