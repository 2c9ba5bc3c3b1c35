import Foundation
import SQLiteDatabase
import Testing

/// The PRAGMA helpers AgentStore added to SQLiteDatabase.
@Suite("SQLiteDatabase pragmas")
struct SQLiteDatabasePragmaTests {
    @Test func userVersion_roundTrips_andRollsBackWithItsTransaction() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let database = try SQLiteDatabase(path: directory.databasePath)
        #expect(try database.userVersion == 0)
        try database.setUserVersion(3)
        #expect(try database.userVersion == 3)
        struct Abort: Error {}
        #expect(throws: Abort.self) {
            try database.transaction {
                try database.setUserVersion(4)
                throw Abort()
            }
        }
        #expect(try database.userVersion == 3)
        #expect(!database.isInTransaction)
    }

    @Test func maxPageCount_turnsGrowthIntoSQLITE_FULL_andIntegrityStaysOK() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let database = try SQLiteDatabase(path: directory.databasePath)
        try database.execute("CREATE TABLE t(b BLOB)")
        let limit = try database.pageCount + 4
        #expect(try database.setMaxPageCount(limit) == limit)
        let insert = try database.prepare("INSERT INTO t VALUES(?)")
        let error = #expect(throws: SQLiteError.self) {
            try database.transaction {
                for _ in 0..<100 { try insert.run([.blob([UInt8](repeating: 7, count: 4000))]) }
            }
        }
        #expect(error?.primaryCode == 13)  // SQLITE_FULL
        #expect(!database.isInTransaction)
        #expect(try database.queryInteger("SELECT count(*) FROM t") == 0)
        #expect(try database.integrityCheck() == ["ok"])
        #expect(try database.pageSize >= 512)
    }

    @Test func pageCacheBytes_roundTripsInWholeKiB() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let database = try SQLiteDatabase(path: directory.databasePath)
        try database.setPageCacheBytes(16 << 20)
        #expect(try database.pageCacheBytes == 16 << 20)
        try database.setPageCacheBytes(1500)
        #expect(try database.pageCacheBytes == 1024)
        try database.execute("PRAGMA cache_size=10")  // a count of pages
        #expect(try database.pageCacheBytes == 10 * (try database.pageSize))
    }

    @Test func secureDelete_roundTrips_andFASTLeavesFreedOverflowPagesUnwritten() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let database = try SQLiteDatabase(path: directory.databasePath)
        for mode in [SQLiteDatabase.SecureDelete.on, .off, .fast] {
            try database.setSecureDelete(mode)
            #expect(try database.secureDelete == mode)
        }
        // A 64 KiB row deleted: with FAST its ~16 overflow pages are not rewritten, so the
        // delete's transaction appends only a few frames to the WAL.
        try database.execute("CREATE TABLE t(b BLOB)")
        try database.prepare("INSERT INTO t VALUES(?)").run([.blob([UInt8](repeating: 7, count: 65536))])
        let walPath = directory.databasePath + "-wal"
        func walBytes() -> Int { (try? FileManager.default.attributesOfItem(atPath: walPath)[.size] as? Int) ?? 0 }
        let before = walBytes()
        try database.execute("DELETE FROM t")
        #expect(walBytes() - before < 8 * 4120, "the delete wrote \(walBytes() - before) bytes to the WAL")
    }

    @Test func freePageCount_countsThePagesADeleteFreed() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let database = try SQLiteDatabase(path: directory.databasePath)
        try database.execute("CREATE TABLE t(b BLOB)")
        #expect(try database.freePageCount == 0)
        let insert = try database.prepare("INSERT INTO t VALUES(?)")
        try database.transaction {
            for _ in 0..<20 { try insert.run([.blob([UInt8](repeating: 7, count: 4000))]) }
        }
        #expect(try database.freePageCount == 0)
        try database.execute("DELETE FROM t")
        #expect(try database.freePageCount >= 20, "each 4,000-byte row held at least one page of its own")
    }
}
