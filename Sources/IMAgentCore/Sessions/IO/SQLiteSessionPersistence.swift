import AgentIPC
import Glibc
import AgentStore
import IMLink
import NIOCore

/// `SessionPersistence` on the SQLite store: what the daemon runs with. The
/// store's group commit applies operations in the order they were submitted
/// and fails a batch as a whole, which is the ordering contract the session
/// router relies on.
final class SQLiteSessionPersistence: SessionPersistence, StoreCompletionSink, Sendable {
    private let store: AgentStore
    private let loop: EventLoop
    private let receiver: NIOLoopBoundBox<(([PersistOutcome]) -> Void)?>
    private let waiting: NIOLoopBoundBox<Waiting>
    private let lingerTime: TimeAmount
    private let quietAfterBusy: TimeAmount

    /// Operations submitted and not completed yet, and whether a linger is scheduled or running.
    private struct Waiting {
        var inFlight = 0
        var lingering = false
        /// No linger before this: the last one found the loop busy with other work.
        var quietUntil = NIODeadline.uptimeNanoseconds(0)
    }

    /// How long the loop keeps running while a lone request is committed (see `linger`): at
    /// `process` a commit takes a fraction of this; at `power` its fsync outlasts any linger
    /// worth having, and lingering would only take processor time from streams.
    static func defaultLingerTime(_ durability: DaemonConfiguration.Durability) -> TimeAmount {
        durability == .process ? .microseconds(300) : .zero
    }
    /// At most this many operations in flight at the end of a turn make it a lone request
    /// and its answer; more is a stream, which keeps the loop busy by itself.
    static let lingerAtMost = 4
    /// A look delayed longer than this found the loop or the machine busy: stop looking.
    private static let busyLook = TimeAmount.microseconds(50)
    /// After a linger that found the loop busy, the loop does not linger for this long: a
    /// stream of messages keeps it awake by itself, and lingers would take processor time from it.
    static let defaultQuietAfterBusy = TimeAmount.milliseconds(10)

    /// The database file inside the configured store directory.
    static func path(inDirectory directory: String) -> String { directory + "/imagentd.sqlite3" }

    /// `maxBytes` nil: half the size of the file system holding `directory` (`imagentd.toml(5)`).
    static func open(directory: String, durability: DaemonConfiguration.Durability, maxBytes: Int? = nil, on loop: EventLoop,
                     commitObserver: StoreCommitObserver? = nil, lingerTime: TimeAmount? = nil,
                     quietAfterBusy: TimeAmount = defaultQuietAfterBusy)
        -> EventLoopFuture<SQLiteSessionPersistence>
    {
        let limit = maxBytes ?? defaultMaxBytes(directory: directory)
        let configuration = StoreConfiguration(path: path(inDirectory: directory), durability: durability.storeDurability,
                                               maximumSizeBytes: limit)
        return AgentStore.open(configuration, on: loop, observer: commitObserver).map {
            SQLiteSessionPersistence(store: $0, loop: loop, lingerTime: lingerTime ?? defaultLingerTime(durability),
                                     quietAfterBusy: quietAfterBusy)
        }
    }

    /// Half of the file system the store is on, so a long queue leaves the host room to work;
    /// nil when statvfs fails (then only a full disk stops the store).
    static func defaultMaxBytes(directory: String) -> Int? {
        var stats = statvfs()
        guard statvfs(directory, &stats) == 0, stats.f_blocks > 0 else { return nil }
        return Int(stats.f_blocks / 2) * Int(stats.f_frsize)
    }

    private init(store: AgentStore, loop: EventLoop, lingerTime: TimeAmount, quietAfterBusy: TimeAmount) {
        self.store = store
        self.loop = loop
        self.lingerTime = lingerTime
        self.quietAfterBusy = quietAfterBusy
        self.receiver = .makeEmptyBox(valueType: (([PersistOutcome]) -> Void).self, eventLoop: loop)
        self.waiting = .makeBoxSendingValue(Waiting(), eventLoop: loop)
    }

    func close() -> EventLoopFuture<Void> {
        store.close(on: loop)
    }

    func load() -> EventLoopFuture<StoreIndex> {
        store.loadIndex(on: loop).flatMapErrorThrowing { throw Self.translate($0) }
    }

    func deliverOutcomes(to receiver: @escaping ([PersistOutcome]) -> Void) {
        self.receiver.value = receiver
    }

    /// Called on the loop, as the router runs there.
    func submit(_ operation: StoreOperation, tag: UInt64) {
        store.submit(operation, tag: tag, on: loop, to: self)
        waiting.value.inFlight += 1
        guard !waiting.value.lingering, lingerTime > .zero else { return }
        waiting.value.lingering = true
        // After this turn's work: only then is it known whether the turn was a lone request.
        loop.assumeIsolated().execute { [self] in
            let now = NIODeadline.now()
            guard waiting.value.inFlight <= Self.lingerAtMost, now >= waiting.value.quietUntil else {
                waiting.value.lingering = false
                return
            }
            linger(until: now + lingerTime, lookedAt: now)
        }
    }

    /// While the store commits a lone request (and later its answer), the loop keeps running
    /// instead of sleeping in `epoll_wait`, so the completion finds it awake: waking a sleeping
    /// thread, on a virtual machine whose processor went idle, costs more than the looks do,
    /// the same wake the store's writer saves with its own linger. Each look is a task on the
    /// loop, so I/O and other tasks run between looks; the processor is yielded between them,
    /// and a look that came late (the loop or the machine had other work) ends the linger and
    /// holds off the next for `quietAfterBusy`; the last completion or `lingerTime` ends it too.
    private func linger(until deadline: NIODeadline, lookedAt last: NIODeadline) {
        let now = NIODeadline.now()
        let late = now - last > Self.busyLook
        if late { waiting.value.quietUntil = now + quietAfterBusy }
        guard waiting.value.inFlight > 0, now < deadline, !late else {
            waiting.value.lingering = false
            return
        }
        // The next look measures from this one: a yield that gave the processor away makes it late too.
        sched_yield()
        loop.assumeIsolated().execute { [self] in linger(until: deadline, lookedAt: now) }
    }

    /// Whether the loop is lingering for the store now (for tests).
    var isLingering: Bool { waiting.value.lingering }

    func storeCompleted(_ completions: [StoreCompletion]) {
        waiting.value.inFlight -= completions.count
        guard let receiver = receiver.value else { preconditionFailure("a store outcome before deliverOutcomes(to:)") }
        receiver(completions.map { completion in
            PersistOutcome(tag: completion.tag, result: completion.outcome.mapError(Self.translate))
        })
    }

    /// `.full` is the one failure a sender can wait out (QUEUE_FULL); the rest are reported as they are.
    private static func translate(_ error: Error) -> SessionPersistenceError {
        guard let error = error as? StoreError else { return SessionPersistenceError.failed("\(error)") }
        if case .full = error { return SessionPersistenceError.full }
        return SessionPersistenceError.failed(error.description)
    }
}

extension DaemonConfiguration.Durability {
    var storeDurability: Durability {
        switch self {
        case .process: .process
        case .power: .power
        }
    }
}
