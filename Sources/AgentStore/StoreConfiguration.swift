import NIOCore
import SQLiteDatabase

/// How much of the recent past a commit survives.
///
/// Both levels keep the database consistent after any crash: SQLite's WAL
/// either has a transaction's commit record or ignores the transaction. They
/// differ only in which *committed* transactions may be lost.
public enum Durability: String, Sendable, Hashable, CaseIterable {
    /// `PRAGMA synchronous=NORMAL`: a committed transaction survives a crash or
    /// `kill -9` of the process, because the commit has been written to the WAL
    /// in the kernel's page cache. A power loss or kernel crash may lose the
    /// last transactions committed before the WAL was next synced (at a
    /// checkpoint). No fsync per commit, so commits are cheap.
    case process
    /// `PRAGMA synchronous=FULL`: a committed transaction also survives power
    /// loss, because every commit fsyncs the WAL before it returns. Costs one
    /// fsync per commit — group commit shares it among every message of the batch.
    case power

    /// The SQLite setting that gives this level in WAL mode.
    public var synchronous: Synchronous {
        switch self {
        case .process: .normal
        case .power: .full
        }
    }
}

/// Where the store lives and how it commits.
public struct StoreConfiguration: Sendable, Hashable {
    /// The SQLite database file; its `-wal` and `-shm` files sit beside it.
    public var path: String
    /// See `Durability`; `.process` unless the configuration asks for power-loss safety.
    public var durability: Durability
    /// The largest the database file and its payload segment files together may grow, in
    /// bytes (nil: until the disk is full). A commit that would pass it fails with
    /// `StoreError.full`, exactly like a full disk, so the daemon refuses new messages
    /// (QUEUE_FULL) long before the disk fills. The WAL beside the database holds at most
    /// the batches since the last checkpoint and is cut back to
    /// `StoreWriter.walSizeLimitBytes` after each one, so budget that much more.
    public var maximumSizeBytes: Int?
    /// Payloads of this many bytes or more are written to a segment file beside the database
    /// (`<path>-payloads.<n>`, see `PayloadSegments`) instead of into it: once, with one
    /// `pwrite`, where SQLite would spread them over a chain of overflow pages written to the
    /// WAL and copied again by the checkpoint. Below it a payload stays inside its row, on the
    /// b-tree page the append writes anyway.
    public var largePayloadBytes: Int
    /// A segment file takes new payloads until it holds this many bytes; the next commit starts
    /// another. A segment is deleted once no stored message is in it.
    public var segmentFileBytes: Int
    /// The most operations one transaction takes from the queue. Bounds the time
    /// one commit holds the writer and the memory a batch pins; operations beyond
    /// it wait for the next commit, which starts immediately.
    public var maximumBatchOperations: Int
    /// The most memory the writer's SQLite page cache may hold (SQLite's default is 2 MB).
    /// Outbound messages are read back from the store shortly after they were written (the
    /// session's window streams from it); while their pages are still in this cache the read
    /// costs a copy from memory instead of a `pread` of the write-ahead log per page. The cache
    /// is anonymous memory the daemon keeps once used, and a larger one saves little CPU against
    /// the RssAnon that QueueMemoryTests hold flat while queued and after a restart, so the default
    /// stays at SQLite's 2 MiB.
    public var pageCacheBytes: Int
    /// How long the writer thread keeps looking for more work after a commit before it sleeps
    /// (zero: it sleeps at once). A request and its answer are committed one after the other,
    /// each about a link round trip after the last; a writer still looking takes the next at
    /// once instead of being woken, which on a virtual machine saves a scheduler delay per commit.
    /// It yields the CPU between looks and stops as soon as another thread wants that processor;
    /// an idle daemon never lingers, nor does the writer after a commit that wrote payloads to
    /// the segment files (`largePayloadBytes` and more: their copies dwarf a wake).
    public var writerLinger: TimeAmount

    /// The default `writerLinger`.
    public static let defaultWriterLinger = TimeAmount.microseconds(250)

    /// The default `largePayloadBytes`: a payload that no longer fits on a 4 KiB page.
    public static let defaultLargePayloadBytes = 4096

    /// The default `segmentFileBytes`.
    public static let defaultSegmentFileBytes = 16 << 20

    /// The default `pageCacheBytes`.
    public static let defaultPageCacheBytes = 2 << 20

    public init(path: String, durability: Durability = .process, maximumSizeBytes: Int? = nil,
                maximumBatchOperations: Int = 8192, pageCacheBytes: Int = StoreConfiguration.defaultPageCacheBytes,
                writerLinger: TimeAmount = StoreConfiguration.defaultWriterLinger,
                largePayloadBytes: Int = StoreConfiguration.defaultLargePayloadBytes,
                segmentFileBytes: Int = StoreConfiguration.defaultSegmentFileBytes) {
        precondition(maximumBatchOperations > 0, "a batch must take at least one operation")
        precondition(largePayloadBytes > 0 && segmentFileBytes > 0, "payload sizes must be positive")
        self.path = path
        self.durability = durability
        self.maximumSizeBytes = maximumSizeBytes
        self.maximumBatchOperations = maximumBatchOperations
        self.pageCacheBytes = pageCacheBytes
        self.writerLinger = writerLinger
        self.largePayloadBytes = largePayloadBytes
        self.segmentFileBytes = segmentFileBytes
    }
}
