import SQLiteDatabase

/// The store's schema as a list of numbered migrations.
///
/// `PRAGMA user_version` holds the number of the last migration applied. Each
/// migration runs in its own transaction together with the version bump, so a
/// crash mid-upgrade leaves the previous version intact and the next start
/// simply runs it again. Migrations are append-only: never edit a shipped one,
/// add the next number.
enum StoreSchema {
    struct Migration {
        let version: Int32
        let summary: String
        let sql: String
    }

    static let migrations: [Migration] = [
        Migration(
            version: 1, summary: "sessions, outbox, inbox, metadata",
            // outbox and inbox are ordinary rowid tables on purpose: a WITHOUT ROWID
            // table is an index b-tree, whose rows spill to an overflow page above
            // ~1000 bytes on 4 KiB pages, so every 1 KiB message would cost a second
            // page. In a rowid table a row up to ~4 KiB stays on its leaf, and the
            // PRIMARY KEY's index holds only (session, seq, rowid).
            sql: """
            CREATE TABLE sessions(
                id INTEGER PRIMARY KEY,             -- u64 id as the i64 with the same bits
                service TEXT NOT NULL,
                owner_uid INTEGER NOT NULL,
                priority INTEGER NOT NULL,
                durable INTEGER NOT NULL,
                state TEXT NOT NULL CHECK (state IN ('open', 'failed', 'closed')),
                failure_code INTEGER,
                sent_seq INTEGER NOT NULL DEFAULT 0,       -- highest outbound seq assigned
                acked_seq INTEGER NOT NULL DEFAULT 0,      -- highest outbound seq the server acknowledged
                received_seq INTEGER NOT NULL DEFAULT 0,   -- highest inbound seq stored
                delivered_seq INTEGER NOT NULL DEFAULT 0,  -- highest inbound seq a client acknowledged
                created_ms INTEGER NOT NULL
            );
            CREATE TABLE outbox(
                session INTEGER NOT NULL,
                seq INTEGER NOT NULL,
                payload BLOB NOT NULL,
                expires_ms INTEGER,
                PRIMARY KEY (session, seq)
            );
            CREATE INDEX outbox_expiry ON outbox(expires_ms) WHERE expires_ms IS NOT NULL;
            CREATE TABLE inbox(
                session INTEGER NOT NULL,
                seq INTEGER NOT NULL,
                payload BLOB NOT NULL,
                PRIMARY KEY (session, seq)
            );
            CREATE TABLE metadata(
                key TEXT PRIMARY KEY,
                value TEXT NOT NULL
            ) WITHOUT ROWID;
            """
        ),
        Migration(
            version: 2, summary: "sessions.given_up: outbound messages given up before the server had them",
            // The daemon numbers DATA on the wire without the seqs of messages it gave up
            // (TTL passed, too large for the server), so after a restart it needs their
            // count to map the server's LAST_ACKED back to its own seqs.
            sql: """
            ALTER TABLE sessions ADD COLUMN given_up INTEGER NOT NULL DEFAULT 0;
            """
        ),
        Migration(
            version: 3, summary: "outbox_session_expiry: one session's expired messages without a scan of its queue",
            // The daemon keeps no per-message metadata in memory: it finds the messages whose
            // TTL passed, and the next deadline, with one range of this index per session.
            sql: """
            CREATE INDEX outbox_session_expiry ON outbox(session, expires_ms) WHERE expires_ms IS NOT NULL;
            """
        ),
        Migration(
            version: 4, summary: "outbox and inbox rows may hold their payload in a segment file beside the database",
            // A large payload is written once to `<database>-payloads.<segment>` (see PayloadSegments);
            // its row keeps an empty payload and where the bytes are, with their length and CRC-32C.
            // The partial indexes find whether any row still refers to a segment without a scan.
            sql: """
            ALTER TABLE outbox ADD COLUMN segment INTEGER;
            ALTER TABLE outbox ADD COLUMN segment_offset INTEGER;
            ALTER TABLE outbox ADD COLUMN payload_bytes INTEGER;
            ALTER TABLE outbox ADD COLUMN payload_crc INTEGER;
            ALTER TABLE inbox ADD COLUMN segment INTEGER;
            ALTER TABLE inbox ADD COLUMN segment_offset INTEGER;
            ALTER TABLE inbox ADD COLUMN payload_bytes INTEGER;
            ALTER TABLE inbox ADD COLUMN payload_crc INTEGER;
            CREATE INDEX outbox_segment ON outbox(segment) WHERE segment IS NOT NULL;
            CREATE INDEX inbox_segment ON inbox(segment) WHERE segment IS NOT NULL;
            """
        ),
        Migration(
            version: 5, summary: "no metadata table and no store-wide expiry index: nothing reads or writes them",
            // Messages expire per session (outbox_session_expiry), and the daemon keeps no key-value state here.
            sql: """
            DROP INDEX outbox_expiry;
            DROP TABLE metadata;
            """
        ),
    ]

    /// The version this build writes and understands.
    static var latestVersion: Int32 { migrations.last?.version ?? 0 }

    /// Brings `database` up to `latestVersion`, or refuses a database from a newer build.
    ///
    /// - Returns: the versions applied, oldest first (empty when it was current).
    @discardableResult
    static func migrate(_ database: SQLiteDatabase) throws -> [Int32] {
        var applied: [Int32] = []
        for migration in migrations {
            // Read the version inside the write transaction, so two processes
            // opening the same new file cannot both run a migration.
            let ran = try database.transaction { () throws -> Bool in
                let current = try database.userVersion
                guard current <= latestVersion else {
                    throw StoreError.schemaTooNew(found: current, supported: latestVersion, path: database.path)
                }
                guard current < migration.version else { return false }
                precondition(current == migration.version - 1, "migrations must be numbered 1, 2, 3, … without holes")
                try database.execute(migration.sql)
                try database.setUserVersion(migration.version)
                return true
            }
            if ran { applied.append(migration.version) }
        }
        return applied
    }
}
