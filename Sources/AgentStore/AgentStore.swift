import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// The daemon's durable memory: sessions, outbox and inbox in one SQLite
/// database in WAL mode, large payloads in segment files beside it.
///
/// Every method returns at once with a future on the event loop the caller
/// names; the SQLite work happens on the store's own writer thread, so the
/// daemon's loop never blocks on a disk. A future succeeds only after the
/// transaction holding the operation has committed at the configured
/// `Durability` — send `ACCEPTED` to a client or `ACK` to the server from
/// there, never earlier.
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

    private init(configuration: StoreConfiguration, queue: CommitQueue, pool: NIOThreadPool,
                 statistics: NIOLockedValueBox<StoreStatistics>) {
        self.configuration = configuration
        self.queue = queue
        self.pool = pool
        self.statisticsBox = statistics
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
        }.map { writer in
            AgentStore(configuration: configuration,
                       queue: CommitQueue(writer: writer, pool: pool, maximumBatchOperations: configuration.maximumBatchOperations,
                                          lingerTime: configuration.writerLinger),
                       pool: pool, statistics: statistics)
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

    /// Applies one operation like `perform`, in the same queue and order, and hands its
    /// outcome with `tag` to `sink` on `loop` (see `StoreCompletionSink`): the daemon's hot
    /// path, with no future per message.
    public func submit(_ operation: StoreOperation, tag: UInt64, on loop: EventLoop, to sink: any StoreCompletionSink) {
        queue.submit(CommitQueue.Submission(operation: operation, tag: tag, loop: loop, sink: sink))
    }

    /// Waits for every queued operation to commit, closes the database, and stops
    /// the writer thread. Later operations fail with `StoreError.closed`.
    public func close(on loop: EventLoop) -> EventLoopFuture<Void> {
        let closed = loop.makePromise(of: Void.self)
        queue.close(promise: closed)
        return closed.futureResult.flatMap { [pool] in
            let stopped = loop.makePromise(of: Void.self)
            pool.shutdownGracefully { error in
                if let error { stopped.fail(error) } else { stopped.succeed(()) }
            }
            return stopped.futureResult
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
