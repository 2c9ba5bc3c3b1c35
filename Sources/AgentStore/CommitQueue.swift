import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The queue in front of the writer thread: the heart of group commit.
///
/// Callers on any thread `submit`; the first submission into an idle queue
/// starts a *drain* on the writer thread. A drain takes everything queued
/// (up to `maximumBatchOperations`), commits it as one transaction, completes
/// the futures, and loops; meanwhile new submissions simply pile up behind the
/// running commit and become the next batch. Under load, batch size therefore
/// grows by itself to whatever arrived during one commit (one fsync at
/// `.power`), and when idle a lone submission is committed at once: there is
/// no timer and no latency added to wait for company. A drain that finds the
/// queue empty lingers a moment (`StoreConfiguration.writerLinger`) before its
/// thread sleeps, so the next submission, often a round trip away, is taken
/// without waking a sleeping thread.
///
/// ```
///  loop ──submit──▶ [pending] ──take all──▶ writer: BEGIN; op; op; …; COMMIT ──▶ complete futures
///                      ▲                                   │
///                      └──── new submissions wait here ────┘
/// ```
final class CommitQueue: Sendable {
    struct Submission: Sendable {
        let operations: [StoreOperation]
        let completion: Completion

        init(operations: [StoreOperation], promise: EventLoopPromise<[StoreResult]>) {
            self.operations = operations
            self.completion = .promise(promise)
        }

        /// One operation whose outcome goes to `sink` on `loop`, with `tag`.
        init(operation: StoreOperation, tag: UInt64, loop: EventLoop, sink: any StoreCompletionSink) {
            self.operations = [operation]
            self.completion = .sink(loop, sink, tag: tag)
        }

        var loop: EventLoop {
            switch completion {
            case .promise(let promise): promise.futureResult.eventLoop
            case .sink(let loop, _, _): loop
            }
        }

        func fail(_ error: StoreError) {
            switch completion {
            case .promise(let promise): promise.fail(error)
            case .sink(let loop, let sink, let tag):
                loop.execute { sink.storeCompleted([StoreCompletion(tag: tag, outcome: .failure(error))]) }
            }
        }
    }

    /// Where a submission's outcome goes.
    enum Completion: Sendable {
        case promise(EventLoopPromise<[StoreResult]>)
        case sink(EventLoop, any StoreCompletionSink, tag: UInt64)
    }

    /// Whether a drain runs; only a drain (scheduled, committing or lingering) touches the writer.
    private enum DrainState {
        /// No drain: the next release starts one.
        case idle
        /// A drain is scheduled or committing, and takes what is queued after its batch.
        case committing
        /// The drain has nothing to commit and polls `wake` for a while before it ends.
        case lingering
    }

    private struct State {
        var pending: CircularBuffer<Submission> = []
        var drain = DrainState.idle
        /// A task at the end of a loop's turn will hand that turn's submissions to the writer.
        var releaseScheduled = false
        /// `close` was called: refuse new submissions, close the writer after the last drain.
        var closing = false
        var closePromises: [EventLoopPromise<Void>] = []
        /// The writer is gone; set once, by the drain that closed it.
        var closed = false
    }

    private let state = NIOLockedValueBox(State())
    private let pool: NIOThreadPool
    /// Taken by the closing drain, so the database closes on the writer thread.
    private let writer: NIOLockedValueBox<StoreWriter?>
    private let maximumBatchOperations: Int
    /// How long a drain with nothing left polls for more before its thread sleeps (see `linger`).
    private let lingerTime: TimeAmount
    /// Set (under `state`'s lock, while the drain is `.lingering`) when there is work for the lingering drain.
    private let wake = Atomic<Bool>(false)

    init(writer: StoreWriter, pool: NIOThreadPool, maximumBatchOperations: Int, lingerTime: TimeAmount) {
        self.writer = NIOLockedValueBox(writer)
        self.pool = pool
        self.maximumBatchOperations = maximumBatchOperations
        self.lingerTime = lingerTime
    }

    func submit(_ submission: Submission) {
        let release = state.withLockedValue { state -> Bool? in
            guard !state.closing else { return nil }
            state.pending.append(submission)
            // A busy writer takes it after its batch; otherwise one release per turn hands it over.
            guard state.drain != .committing, !state.releaseScheduled else { return false }
            state.releaseScheduled = true
            return true
        }
        switch release {
        case nil: submission.fail(StoreError.closed)
        case true?: releaseAfterThisTurn(of: submission.loop)
        case false?: break
        }
    }

    /// Submitted from its event loop, the writer gets the submission once the loop has
    /// handled what it read in this turn, so it takes everything of the turn as ONE commit
    /// (a server's ACK and the DATA read with it; a client's burst of SENDs) instead of
    /// committing the first submission alone and the rest after it. The order of
    /// submissions is unchanged (they are queued at once); a submission from another
    /// thread is handed over at once.
    private func releaseAfterThisTurn(of loop: EventLoop) {
        guard loop.inEventLoop else { return release() }
        loop.execute { self.release() }
    }

    /// Hands the queued submissions to the writer: wakes a lingering drain, or starts one.
    private func release() {
        let startDrain = state.withLockedValue { state -> Bool in
            state.releaseScheduled = false
            switch state.drain {
            case .committing:
                return false
            case .lingering:
                wake.store(true, ordering: .releasing)
                return false
            case .idle:
                guard !state.pending.isEmpty else { return false }
                state.drain = .committing
                return true
            }
        }
        if startDrain { scheduleDrain() }
    }

    /// Refuses new submissions, lets every queued one commit, then closes the database.
    func close(promise: EventLoopPromise<Void>) {
        let action = state.withLockedValue { state -> CloseAction in
            if state.closed { return .alreadyClosed }
            state.closing = true
            state.closePromises.append(promise)
            switch state.drain {
            case .committing:
                return .drainWillClose
            case .lingering:
                wake.store(true, ordering: .releasing)
                return .drainWillClose
            case .idle:
                state.drain = .committing
                return .startDrain
            }
        }
        switch action {
        case .alreadyClosed: promise.succeed(())
        case .drainWillClose: break
        case .startDrain: scheduleDrain()
        }
    }

    private enum CloseAction {
        case alreadyClosed
        case drainWillClose
        case startDrain
    }

    /// Runs `body` with the writer on the writer thread, between batches (for
    /// diagnostics such as `integrityCheck`).
    func withWriter<Result: Sendable>(on loop: EventLoop, _ body: @escaping @Sendable (StoreWriter) throws -> Result) -> EventLoopFuture<Result> {
        pool.runIfActive(eventLoop: loop) { [writer] in
            // The writer thread is the pool's only thread, so no batch runs meanwhile.
            guard let current = writer.withLockedValue({ $0 }) else { throw StoreError.closed }
            return try body(current)
        }
    }

    private func scheduleDrain() {
        pool.submit { workState in
            switch workState {
            case .active: self.drain()
            case .cancelled: self.failEverything(with: .closed)
            }
        }
    }

    /// The writer thread's loop: batch after batch until the queue is empty, then a linger.
    private func drain() {
        // Whether the last commit was cheap enough that the wake a linger saves is worth looking for.
        var lingers = true
        while true {
            let next = state.withLockedValue { state -> DrainStep in
                if state.pending.isEmpty {
                    if state.closing, !state.closed {
                        state.closed = true
                        state.drain = .idle
                        let promises = state.closePromises
                        state.closePromises = []
                        return .close(promises)
                    }
                    guard lingerTime > .zero, lingers else {
                        state.drain = .idle
                        return .idle
                    }
                    state.drain = .lingering
                    return .linger
                }
                var batch: [Submission] = []
                var operations = 0
                // Always take at least one submission, however large it is.
                while let first = state.pending.first,
                      batch.isEmpty || operations + first.operations.count <= maximumBatchOperations {
                    batch.append(state.pending.removeFirst())
                    operations += first.operations.count
                }
                return .commit(batch)
            }
            switch next {
            case .idle:
                return
            case .linger:
                guard linger() else { return }
            case .close(let promises):
                // Dropping the last reference closes the connection (sqlite3_close_v2) here, on the writer thread.
                writer.withLockedValue { $0 = nil }
                for promise in promises { promise.succeed(()) }
                return
            case .commit(let batch):
                guard let current = writer.withLockedValue({ $0 }) else {
                    for submission in batch { submission.fail(StoreError.closed) }
                    continue
                }
                let outcomes = current.apply(batch.map(\.operations))
                lingers = !current.lastTransactionWrotePayloadFiles
                Self.complete(batch, with: outcomes)
            }
        }
    }

    /// Waits up to `lingerTime` for a release, yielding the CPU between looks; true when one
    /// came (the drain goes on), false when the drain ends. Waking a writer that sleeps costs
    /// a futex wake and, on a virtual machine whose CPU went idle, a scheduler delay longer than
    /// many looks; a request/response exchange commits twice per round trip, each time shortly
    /// after the last commit, so the writer that is still looking takes the next one at once.
    /// An idle daemon pays nothing: the linger follows a commit only. Nor does a stream of
    /// large payloads: after a commit that wrote some to the segment files the drain ends at
    /// once, as copying each of them costs far more than a wake, and looking would only take
    /// processor time from the next (at 64 KiB, 8 % of the daemon's CPU per message).
    ///
    /// A yield that took longer than `busyYield` gave the processor to another thread: the
    /// machine has work for it, and the writer stops looking and sleeps.
    private func linger() -> Bool {
        var now = NIODeadline.now()
        let deadline = now + lingerTime
        while !wake.load(ordering: .acquiring), now < deadline {
            sched_yield()
            let before = now
            now = NIODeadline.now()
            if now - before > Self.busyYield { break }
        }
        return state.withLockedValue { state in
            // Set only under this lock while lingering, so a release never goes unseen; work
            // with no release on its way (none should be) is taken rather than left behind.
            let goOn = wake.exchange(false, ordering: .acquiring) || (!state.pending.isEmpty && !state.releaseScheduled)
            state.drain = goOn ? .committing : .idle
            return goOn
        }
    }

    private static let busyYield = TimeAmount.microseconds(50)

    private enum DrainStep {
        case idle
        case linger
        case commit([Submission])
        case close([EventLoopPromise<Void>])
    }

    /// Completes a batch with one hop per event loop rather than one per submission: the
    /// daemon's 10,000 appends become a single task on its loop. Within it, outcomes keep
    /// submission order; consecutive outcomes for one sink go to it in one call.
    private static func complete(_ batch: [Submission], with outcomes: [Result<[StoreResult], StoreError>]) {
        var byLoop: [ObjectIdentifier: (EventLoop, [(Completion, Result<[StoreResult], StoreError>)])] = [:]
        for (submission, outcome) in zip(batch, outcomes) {
            let loop = submission.loop
            byLoop[ObjectIdentifier(loop), default: (loop, [])].1.append((submission.completion, outcome))
        }
        for (loop, completions) in byLoop.values {
            loop.execute { deliver(completions) }
        }
    }

    private static func deliver(_ completions: [(Completion, Result<[StoreResult], StoreError>)]) {
        var run: [StoreCompletion] = []
        var runSink: (any StoreCompletionSink)?
        func flush() {
            guard let sink = runSink, !run.isEmpty else { return }
            sink.storeCompleted(run)
            run.removeAll(keepingCapacity: true)
        }
        for (completion, outcome) in completions {
            switch completion {
            case .promise(let promise):
                flush()
                promise.completeWith(outcome.mapError { $0 as any Error })
            case .sink(_, let sink, let tag):
                if let current = runSink, current !== sink { flush() }
                runSink = sink
                // A sink submission is one operation, so one result.
                run.append(StoreCompletion(tag: tag, outcome: outcome.map { $0[0] }))
            }
        }
        flush()
    }

    /// The pool refused our work (it was shut down under us): nothing queued can run.
    private func failEverything(with error: StoreError) {
        let (pending, closers) = state.withLockedValue { state in
            let pending = Array(state.pending)
            state.pending.removeAll()
            state.drain = .idle
            state.closed = true
            let closers = state.closePromises
            state.closePromises = []
            return (pending, closers)
        }
        for submission in pending { submission.fail(error) }
        for promise in closers { promise.succeed(()) }
    }
}
