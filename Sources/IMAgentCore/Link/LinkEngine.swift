import IMLink
import Logging
import NIOCore
import NIOPosix

/// The one upstream link: the component the daemon's main, the IPC server
/// and the session router talk to.
///
/// All link work runs on `eventLoop` (no locks): the methods below may be
/// called from anywhere and hop to the loop, except the ones marked
/// *on the loop*, which the session router (living on the same loop) calls
/// synchronously. Blocking work (a token command, getaddrinfo) runs on a
/// private one-thread pool. Idle, the engine wakes only for timers that are
/// due: the heartbeat, a backoff, a stage deadline.
///
/// ```swift
/// let engine = try LinkEngine(configuration: config, eventLoop: loop, logger: logger)
/// engine.onTransition { print($0.reason) }   // or: for await t in engine.transitions() { … }
/// engine.start()
/// …
/// await engine.shutdown()
/// ```
final class LinkEngine: Sendable {
    let eventLoop: EventLoop
    private let current: NIOLoopBoundBox<Current>
    private let pool: NIOThreadPool
    private let logger: Logger
    /// Counted by every core this engine makes, so the totals outlive a reconfiguration.
    private let traffic: LinkTraffic

    /// A configuration that passed validation, with its TLS files loaded:
    /// what `reconfigure` swaps in (checked before the running link is touched).
    struct Prepared: @unchecked Sendable {
        let configuration: LinkConfiguration
        let validated: LinkConfiguration.Validated
        let tls: LinkTLS?
    }

    static func prepare(_ configuration: LinkConfiguration) throws(LinkConfigurationError) -> Prepared {
        let validated = try configuration.validated()
        let alpn = configuration.mqtt == nil ? LinkTLS.alpn : LinkTLS.mqttALPN
        let tls = try configuration.tls.enabled
            ? LinkTLS(configuration.tls, endpoints: validated.endpoints, applicationProtocol: alpn) : nil
        return Prepared(configuration: configuration, validated: validated, tls: tls)
    }

    /// One core in its box (the watcher and the loop's tasks reach it through the box).
    private typealias CoreBox = NIOLoopBoundBox<LinkEngineCore>

    /// What runs now, on the loop: the core (nil while unconfigured), its
    /// watcher, and the outputs that outlive a reconfiguration.
    private final class Current {
        var configuration: LinkConfiguration?
        var box: CoreBox?
        var watcher: NetworkWatcher?
        var started = false
        var shutDown = false
        weak var sessionDelegate: LinkSessionDelegate?
        var onTransition: ((LinkTransition) -> Void)?
        var onHeartbeat: ((Duration, Duration?) -> Void)?

        init(configuration: LinkConfiguration?, box: CoreBox?, watcher: NetworkWatcher?) {
            self.configuration = configuration
            self.box = box
            self.watcher = watcher
        }

        var core: LinkEngineCore? { box?.value }
    }

    /// Validates the configuration and loads the TLS files; nothing connects
    /// until `start()`.
    convenience init(configuration: LinkConfiguration, eventLoop: EventLoop, logger: Logger) throws(LinkConfigurationError) {
        self.init(prepared: try Self.prepare(configuration), eventLoop: eventLoop, logger: logger)
    }

    /// An engine with the given configuration, or with none (the daemon's
    /// unconfigured state): it then holds no link until `reconfigure`.
    init(prepared: Prepared?, eventLoop: EventLoop, logger: Logger) {
        let pool = NIOThreadPool(numberOfThreads: 1)
        pool.start()
        self.eventLoop = eventLoop
        self.pool = pool
        self.logger = logger
        let traffic = LinkTraffic()
        let parts = prepared.map { Self.makeParts($0, loop: eventLoop, pool: pool, traffic: traffic, logger: logger) }
        self.current = NIOLoopBoundBox.makeBoxSendingValue(
            Current(configuration: prepared?.configuration, box: parts?.0, watcher: parts?.1), eventLoop: eventLoop)
        self.traffic = traffic
    }

    /// A core and the network watcher that reports to it.
    private static func makeParts(_ prepared: Prepared, loop: EventLoop, pool: NIOThreadPool, traffic: LinkTraffic,
                                  logger: Logger) -> (CoreBox, NetworkWatcher?) {
        let box = CoreBox.makeBoxSendingValue(
            LinkEngineCore(configuration: prepared.configuration, validated: prepared.validated, tls: prepared.tls,
                           loop: loop, pool: pool, traffic: traffic, logger: logger),
            eventLoop: loop)
        guard prepared.configuration.watchNetwork else { return (box, nil) }
        let watcher = NetworkWatcher(endpoints: prepared.validated.endpoints, logger: logger) { event in
            loop.execute { box.value.network(event) }
        }
        return (box, watcher)
    }

    /// Replaces the link's configuration: the current link (if any) closes,
    /// its sessions hear it is lost, and a new one starts with `prepared`
    /// (nil: none, the unconfigured state) — one reconnect, after which the
    /// sessions resume from what the server acknowledged, as after any
    /// reconnect. Returns once the new link has started. `keepDown`: the
    /// new link stays down until `userConnect`, as the old one was.
    func reconfigure(_ prepared: Prepared?, keepDown: Bool = false) async {
        let current = self.current
        let loop = eventLoop
        let old = try? await loop.submit {
            let parts = (current.value.box, current.value.watcher)
            current.value.box = nil
            current.value.watcher = nil
            current.value.configuration = nil
            return parts
        }.get()
        if let box = old?.0 {
            let promise = loop.makePromise(of: Void.self)
            loop.execute { box.value.shutdown(promise: promise) }
            try? await promise.futureResult.get()
        }
        await old?.1?.stop()
        guard let prepared else { return }
        let (box, watcher) = Self.makeParts(prepared, loop: loop, pool: pool, traffic: traffic, logger: logger)
        try? await loop.submit {
            let now = current.value
            // A shutdown that began meanwhile wins: the new core is never started.
            guard !now.shutDown else { return }
            now.box = box
            now.watcher = watcher
            now.configuration = prepared.configuration
            box.value.sessionDelegate = now.sessionDelegate
            box.value.onTransition = now.onTransition
            box.value.onHeartbeat = now.onHeartbeat
            if now.started {
                watcher?.start()
                box.value.start()
                if keepDown { box.value.userDisconnect() }
            }
        }.get()
    }

    // MARK: Lifecycle and user commands

    /// Starts the link (and the network watcher, when configured).
    func start() {
        let current = self.current
        eventLoop.execute {
            current.value.started = true
            current.value.watcher?.start()
            current.value.core?.start()
        }
    }

    /// Connect now, with a fresh backoff (after a user disconnect or a refusal).
    func userConnect() {
        let current = self.current
        eventLoop.execute { current.value.core?.userConnect() }
    }

    /// Close the link and stay disconnected until `userConnect`.
    func userDisconnect() {
        let current = self.current
        eventLoop.execute { current.value.core?.userDisconnect() }
    }

    /// Drop the link (or attempt) and connect again at once.
    func userReconnect() {
        let current = self.current
        eventLoop.execute { current.value.core?.userReconnect() }
    }

    /// Closes the link without waiting for the server (no GOAWAY exists for
    /// the agent's side), stops the watcher and the thread pool. Returns once
    /// the socket is closed; every transition stream finishes.
    func shutdown() async {
        let current = self.current
        try? await eventLoop.submit { current.value.shutDown = true }.get()
        await reconfigure(nil)
        try? await pool.shutdownGracefully()
    }

    // MARK: Observing

    /// A snapshot for `imagent status` and IPC STATUS.
    func status() async -> LinkStatus {
        // Only a loop that is already shut down fails the submit.
        (try? await statusFuture().get()) ?? LinkStatus(phase: .stopped(.shutdown))
    }

    func statusFuture() -> EventLoopFuture<LinkStatus> {
        let current = self.current
        return eventLoop.submit {
            current.value.core?.status ?? LinkStatus(phase: .stopped(current.value.shutDown ? .shutdown : .notStarted))
        }
    }

    /// Every transition with its reason, from now on, until `shutdown` or `reconfigure`.
    /// Each call makes a new subscriber (IPC WATCH clients, sd_notify STATUS).
    func transitions() -> AsyncStream<LinkTransition> {
        let (stream, continuation) = AsyncStream.makeStream(of: LinkTransition.self, bufferingPolicy: .bufferingNewest(256))
        let current = self.current
        let loop = eventLoop
        eventLoop.execute {
            guard let box = current.value.box else { return continuation.finish() }
            let key = box.value.addStream(continuation)
            continuation.onTermination = { _ in loop.execute { box.value.removeStream(key) } }
        }
        return stream
    }

    /// A callback for every transition, called on the loop (for the log and
    /// sd_notify STATUS, which need no buffering). Replaces the previous one.
    func onTransition(_ callback: @escaping @Sendable (LinkTransition) -> Void) {
        let current = self.current
        eventLoop.execute {
            current.value.onTransition = callback
            current.value.core?.onTransition = callback
        }
    }

    /// A callback for every change of the heartbeat interval while connected
    /// (interval, smoothed RTT), called on the loop. Replaces the previous one.
    func onHeartbeat(_ callback: @escaping @Sendable (Duration, Duration?) -> Void) {
        let current = self.current
        eventLoop.execute {
            current.value.onHeartbeat = callback
            current.value.core?.onHeartbeat = callback
        }
    }

    // MARK: Sessions (on the loop)

    /// *On the loop.* The session router: hears link up/down and session frames.
    func setSessionDelegate(_ delegate: LinkSessionDelegate?) {
        current.value.sessionDelegate = delegate
        current.value.core?.sessionDelegate = delegate
    }

    /// *On the loop.* Writes `frame` on the established link; false when no
    /// link is established (or a DATA body exceeds the server's MAX_FRAME).
    func send(_ frame: Frame) -> Bool {
        current.value.core?.send(frame) ?? false
    }

    /// *On the loop.* The server broke the session protocol (a DATA seq gap,
    /// an ACK beyond what was sent): send ERROR PROTOCOL and drop the link;
    /// the next link resumes every session from what is stored.
    func sessionProtocolViolation(_ reason: String) {
        current.value.core?.sessionProtocolViolation(reason)
    }

    /// *On the loop.* IMLink frames and bytes each way since the engine started, over every link it made.
    var trafficCounts: LinkTraffic.Counts {
        traffic.counts
    }

    /// *On the loop.* Hears every RTT sample of every link (for the RTT histogram). Replaces the previous one.
    func onRTTSample(_ callback: @escaping (Duration) -> Void) {
        traffic.rttSampled = callback
    }

    /// *On the loop.* The daemon's own store failed: drop the link without ERROR and back off.
    func localFailure(_ reason: String) {
        current.value.core?.localFailure(reason)
    }

    /// *On the loop.* Stop or resume reading from the link (TCP backpressure on the server).
    func setReading(_ on: Bool) {
        current.value.core?.setReading(on)
    }

    /// *On the loop.* Whether any local client holds a session open; the
    /// heartbeat stretches its interval while none does.
    func setSessionsActive(_ active: Bool) {
        current.value.core?.sessionsActive(active)
    }

    /// Feeds a network event as the watcher would (for tests and for a
    /// daemon that learns of network changes another way).
    func networkEvent(_ event: NetworkEvent) {
        let current = self.current
        eventLoop.execute { current.value.core?.network(event) }
    }
}
