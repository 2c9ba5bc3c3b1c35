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
    let configuration: LinkConfiguration
    private let core: NIOLoopBoundBox<LinkEngineCore>
    private let pool: NIOThreadPool
    private let watcher: NetworkWatcher?
    private let logger: Logger

    /// Validates the configuration and loads the TLS files; nothing connects
    /// until `start()`.
    init(configuration: LinkConfiguration, eventLoop: EventLoop, logger: Logger) throws(LinkConfigurationError) {
        let validated = try configuration.validated()
        let tls = try configuration.tls.enabled ? LinkTLS(configuration.tls, endpoints: validated.endpoints) : nil
        let pool = NIOThreadPool(numberOfThreads: 1)
        pool.start()
        self.eventLoop = eventLoop
        self.configuration = configuration
        self.pool = pool
        self.logger = logger
        self.core = NIOLoopBoundBox.makeBoxSendingValue(
            LinkEngineCore(configuration: configuration, validated: validated, tls: tls, loop: eventLoop, pool: pool, logger: logger),
            eventLoop: eventLoop
        )
        if configuration.watchNetwork {
            let core = self.core
            self.watcher = NetworkWatcher(
                endpoints: validated.endpoints,
                logger: logger
            ) { event in
                eventLoop.execute { core.value.network(event) }
            }
        } else {
            self.watcher = nil
        }
    }

    // MARK: Lifecycle and user commands

    /// Starts the link (and the network watcher, when configured).
    func start() {
        watcher?.start()
        let core = self.core
        eventLoop.execute { core.value.start() }
    }

    /// Connect now, with a fresh backoff (after a user disconnect or a refusal).
    func userConnect() {
        let core = self.core
        eventLoop.execute { core.value.userConnect() }
    }

    /// Close the link and stay disconnected until `userConnect`.
    func userDisconnect() {
        let core = self.core
        eventLoop.execute { core.value.userDisconnect() }
    }

    /// Drop the link (or attempt) and connect again at once.
    func userReconnect() {
        let core = self.core
        eventLoop.execute { core.value.userReconnect() }
    }

    /// Closes the link without waiting for the server (no GOAWAY exists for
    /// the agent's side), stops the watcher and the thread pool. Returns once
    /// the socket is closed; every transition stream finishes.
    func shutdown() async {
        let core = self.core
        let promise = eventLoop.makePromise(of: Void.self)
        eventLoop.execute { core.value.shutdown(promise: promise) }
        try? await promise.futureResult.get()
        await watcher?.stop()
        try? await pool.shutdownGracefully()
    }

    // MARK: Observing

    /// A snapshot for `imagent status` and IPC STATUS.
    func status() async -> LinkStatus {
        // Only a loop that is already shut down fails the submit.
        (try? await statusFuture().get()) ?? LinkStatus(phase: .stopped(.shutdown))
    }

    func statusFuture() -> EventLoopFuture<LinkStatus> {
        let core = self.core
        return eventLoop.submit { core.value.status }
    }

    /// Every transition with its reason, from now on, until `shutdown`.
    /// Each call makes a new subscriber (IPC WATCH clients, sd_notify STATUS).
    func transitions() -> AsyncStream<LinkTransition> {
        let (stream, continuation) = AsyncStream.makeStream(of: LinkTransition.self, bufferingPolicy: .bufferingNewest(256))
        let core = self.core
        let loop = eventLoop
        eventLoop.execute {
            let key = core.value.addStream(continuation)
            continuation.onTermination = { _ in loop.execute { core.value.removeStream(key) } }
        }
        return stream
    }

    /// A callback for every transition, called on the loop (for the log and
    /// sd_notify STATUS, which need no buffering). Replaces the previous one.
    func onTransition(_ callback: @escaping @Sendable (LinkTransition) -> Void) {
        let core = self.core
        eventLoop.execute { core.value.onTransition = callback }
    }

    /// A callback for every change of the heartbeat interval while connected
    /// (interval, smoothed RTT), called on the loop. Replaces the previous one.
    func onHeartbeat(_ callback: @escaping @Sendable (Duration, Duration?) -> Void) {
        let core = self.core
        eventLoop.execute { core.value.onHeartbeat = callback }
    }

    // MARK: Sessions (on the loop)

    /// *On the loop.* The session router: hears link up/down and session frames.
    func setSessionDelegate(_ delegate: LinkSessionDelegate?) {
        core.value.sessionDelegate = delegate
    }

    /// *On the loop.* Writes `frame` on the established link; false when no
    /// link is established (or a DATA body exceeds the server's MAX_FRAME).
    func send(_ frame: Frame) -> Bool {
        core.value.send(frame)
    }

    /// *On the loop.* The server broke the session protocol (a DATA seq gap,
    /// an ACK beyond what was sent): send ERROR PROTOCOL and drop the link;
    /// the next link resumes every session from what is stored.
    func sessionProtocolViolation(_ reason: String) {
        core.value.sessionProtocolViolation(reason)
    }

    /// *On the loop.* IMLink frames and bytes each way since the engine started.
    var traffic: LinkTraffic.Counts {
        core.value.traffic.counts
    }

    /// The daemon's own store failed: drop the link without ERROR and back off.
    func localFailure(_ reason: String) {
        core.value.localFailure(reason)
    }

    /// *On the loop.* Stop or resume reading from the link (TCP backpressure on the server).
    func setReading(_ on: Bool) {
        core.value.setReading(on)
    }

    /// *On the loop.* Whether any local client holds a session open; the
    /// heartbeat stretches its interval while none does.
    func setSessionsActive(_ active: Bool) {
        core.value.sessionsActive(active)
    }

    /// Feeds a network event as the watcher would (for tests and for a
    /// daemon that learns of network changes another way).
    func networkEvent(_ event: NetworkEvent) {
        let core = self.core
        eventLoop.execute { core.value.network(event) }
    }
}
