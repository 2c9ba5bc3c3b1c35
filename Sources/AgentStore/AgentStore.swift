import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// The daemon's durable memory: sessions, outbox, inbox and metadata in one
/// SQLite database in WAL mode.
///
/// Every method returns at once with a future on the event loop the caller
/// names; the SQLite work happens on the store's own writer thread, so the
/// daemon's loop never blocks on a disk. A future succeeds only after the
/// transaction holding the operation has committed at the configured
/// `Durability` — send `ACCEPTED` to a client or `ACK` to the server from
/// there, never earlier.
///
/// The windows' range reads (`readOutbound`, `readInbound`) run on a second,
/// read-only connection on a thread of their own (see `StoreReader`), so a
/// commit never waits for a read.
///
/// Operations are committed in groups (see `CommitQueue`): everything queued
/// while one commit runs goes into the next transaction, so a burst of N
/// messages costs a handful of commits, not N. Futures complete in
/// submission order within a batch, and batches commit in submission order,
/// so two operations submitted one after the other are applied in that order.
///
/// ```swift
/// let store = try AgentStore.open(StoreConfiguration(path: "/var/lib/imagent/imagent.sqlite"), on: loop).wait()
/// let snapshot = try store.load(on: loop).wait()            // rebuild sessions at start-up
/// store.appendOutbound(session: id, seq: 8, payload: bytes, on: loop).whenSuccess { sendAccepted() }
/// ```
public final class AgentStore: Sendable {
    public let configuration: StoreConfiguration
    private let queue: CommitQueue
    private let pool: NIOThreadPool
    private let statisticsBox: NIOLockedValueBox<StoreStatistics>
    /// The reader thread and its connection (nil once closed).
    private let readerPool: NIOThreadPool
    private let reader: NIOLockedValueBox<StoreReader?>

    private init(configuration: StoreConfiguration, queue: CommitQueue, pool: NIOThreadPool,
                 statistics: NIOLockedValueBox<StoreStatistics>, readerPool: NIOThreadPool, reader: StoreReader) {
        self.configuration = configuration
        self.queue = queue
        self.pool = pool
        self.statisticsBox = statistics
        self.readerPool = readerPool
        self.reader = NIOLockedValueBox(reader)
    }

    /// Opens (creating if needed) the database, migrates its schema, and starts the writer thread.
    ///
    /// Fails with `StoreError.schemaTooNew` for a database written by a newer
    /// imagentd, and with `.io`/`.corrupt`/`.database` when SQLite cannot open it.
    /// `observer` hears every committed transaction (see `StoreCommitObserver`).
    public static func open(_ configuration: StoreConfiguration, on loop: EventLoop,
                            observer: StoreCommitObserver? = nil) -> EventLoopFuture<AgentStore> {
        let pool = NIOThreadPool(numberOfThreads: 1)
        pool.start()
        let statistics = NIOLockedValueBox(StoreStatistics())
        return pool.runIfActive(eventLoop: loop) {
            // Opened on the writer thread, which is the only one that will ever use the connection.
            try StoreWriter(configuration: configuration, statistics: statistics, observer: observer)
        }.flatMap { writer in
            // After the writer: the file exists and its schema is current.
            let readerPool = NIOThreadPool(numberOfThreads: 1)
            readerPool.start()
            return readerPool.runIfActive(eventLoop: loop) {
                try StoreReader(path: configuration.path)
            }.map { reader in
                AgentStore(configuration: configuration,
                           queue: CommitQueue(writer: writer, pool: pool, maximumBatchOperations: configuration.maximumBatchOperations),
                           pool: pool, statistics: statistics, readerPool: readerPool, reader: reader)
            }.flatMapError { error in
                let promise = loop.makePromise(of: AgentStore.self)
                readerPool.shutdownGracefully { _ in promise.fail(error) }
                return promise.futureResult
            }
        }.flatMapError { error in
            let promise = loop.makePromise(of: AgentStore.self)
            pool.shutdownGracefully { _ in promise.fail(error) }
            return promise.futureResult
        }
    }

    /// Applies `operations` atomically (all or none), in a transaction shared
    /// with whatever else is queued. The results are in the operations' order.
    ///
    /// The future fails with a request error (`unknownSession`, `duplicateSeq`, …)
    /// when one of these operations broke a rule, or with a batch error (`full`,
    /// `io`, …) when SQLite could not commit; in both cases none of these
    /// operations took effect.
    public func perform(_ operations: [StoreOperation], on loop: EventLoop) -> EventLoopFuture<[StoreResult]> {
        let promise = loop.makePromise(of: [StoreResult].self)
        guard !operations.isEmpty else {
            promise.succeed([])
            return promise.futureResult
        }
        queue.submit(CommitQueue.Submission(operations: operations, promise: promise))
        return promise.futureResult
    }

    /// Waits for every queued operation to commit, closes the database, and stops
    /// the writer and reader threads. Later operations fail with `StoreError.closed`.
    public func close(on loop: EventLoop) -> EventLoopFuture<Void> {
        let closed = loop.makePromise(of: Void.self)
        queue.close(promise: closed)
        return closed.futureResult.flatMap { [pool] in
            Self.shutDown(pool, on: loop)
        }.flatMap { [readerPool, reader] in
            // Reads still queued run first (they fail with `.closed` once the connection is gone).
            Self.shutDown(readerPool, on: loop).always { _ in reader.withLockedValue { $0 = nil } }
        }
    }

    private static func shutDown(_ pool: NIOThreadPool, on loop: EventLoop) -> EventLoopFuture<Void> {
        let stopped = loop.makePromise(of: Void.self)
        pool.shutdownGracefully { error in
            if let error { stopped.fail(error) } else { stopped.succeed(()) }
        }
        return stopped.futureResult
    }

    /// Runs `body` with the reader connection on the reader thread (see `StoreReader`
    /// for what a read sees).
    func withReader<Value: Sendable>(on loop: EventLoop,
                                     _ body: @escaping @Sendable (StoreReader) throws -> Value) -> EventLoopFuture<Value> {
        readerPool.runIfActive(eventLoop: loop) { [reader] in
            guard let current = reader.withLockedValue({ $0 }) else { throw StoreError.closed }
            return try body(current)
        }.flatMapErrorThrowing { error in
            // A pool already shut down refuses the work: the store is closed.
            throw (error as? StoreError) ?? StoreError.closed
        }
    }

    /// Counters of the writer's work so far (commits, operations, failures).
    public var statistics: StoreStatistics {
        statisticsBox.withLockedValue { $0 }
    }

    /// `PRAGMA integrity_check` between two batches: `["ok"]` for a sound database.
    public func integrityCheck(on loop: EventLoop) -> EventLoopFuture<[String]> {
        queue.withWriter(on: loop) { writer in try writer.integrityCheck() }
    }
}
