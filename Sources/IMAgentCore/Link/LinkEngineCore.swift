import IMLink
import Logging
import NIOCore
import NIOPosix

/// The loop-confined half of `LinkEngine`: it feeds the pure cores
/// (`LinkStateMachine`, `HeartbeatPolicy`, `SuspendDetector`) with events and
/// performs the actions they return. It decides nothing itself: every
/// "what next" is the state machine's answer, every "when to PING" the
/// heartbeat policy's. Everything here runs on `loop`; blocking work (token
/// command, getaddrinfo) goes to `pool` and comes back to the loop.
final class LinkEngineCore {
    typealias Machine = LinkStateMachine<SystemRandomNumberGenerator>
    typealias Heartbeat = HeartbeatPolicy<SystemRandomNumberGenerator>

    /// The one socket, from the TCP stage until it is closed.
    struct Connection {
        let attempt: AttemptID
        let endpoint: Endpoint
        let limit: FrameLimit
        var channel: Channel?
        var helloSentAt: MonotonicInstant?
        /// With MQTT, CONNECT→CONNACK is the first real round trip (the adapter answers HELLO itself).
        var loginSentAt: MonotonicInstant?
        /// MAX_FRAME from HELLO_OK: the largest body we may send.
        var serverMaxFrame: UInt32 = FrameHeader.defaultMaxBody
        var negotiated: HelloResult?
        /// Set once the state machine asked to close: later frames are ignored.
        var closing = false
        /// Why the socket is going away, for the `connectionClosed` event.
        var closeReason: String?
    }

    let loop: EventLoop
    let configuration: LinkConfiguration
    let tls: LinkTLS?
    let pool: NIOThreadPool
    let logger: Logger
    var machine: Machine
    var heartbeat: Heartbeat
    var suspend = SuspendDetector()
    let pathProber: PathProber
    var resolveCache: ResolveCache
    var token: [UInt8]?
    var linkTimers: [LinkTimerID: Scheduled<Void>] = [:]
    var heartbeatTimer: Scheduled<Void>?
    var connection: Connection?
    /// The endpoint the attempt in its resolve or TCP stage is for.
    var attemptEndpoint: (attempt: AttemptID, endpoint: Endpoint)?

    // Status bookkeeping.
    var connectedSinceUnixMS: UInt64?
    var establishedCount = 0
    var attempts = 0
    var lastError: String?
    /// Transitions logged at info since probing began (see `transitioned`).
    var probingLogged = 0
    static let probeTransitionsLogged = 6

    /// Frames and bytes each way, for the metrics (the engine's, shared by its cores).
    let traffic: LinkTraffic

    /// The sessions asked not to read from the link (see `setReading`).
    var readingPaused = false

    /// The server's clock minus ours at the last LOGIN_OK (ms), from its SERVER_TIME.
    var serverClockOffsetMS: Int64?
    /// When the server's TLS certificate of the last handshake expires (Unix ms).
    var serverCertificateNotAfterUnixMS: UInt64?

    // Outputs.
    weak var sessionDelegate: LinkSessionDelegate?
    var onTransition: ((LinkTransition) -> Void)?
    /// The heartbeat interval (and smoothed RTT) whenever the interval changes on a connected link.
    var onHeartbeat: ((Duration, Duration?) -> Void)?
    var reportedInterval: Duration?
    /// RTT samples already handed to `traffic.rttSampled`.
    var reportedSamples = 0
    var streams: [Int: AsyncStream<LinkTransition>.Continuation] = [:]
    var nextStreamKey = 0
    var shutdownPromises: [EventLoopPromise<Void>] = []

    // The action queue: an action whose performance produces another event
    // (a cached token, say) appends that event's actions behind the current
    // list, so actions always run in the order the cores returned them.
    var pending: [LinkAction] = []
    var draining = false
    /// A flush of the link's channel is queued on the loop (see `scheduleFlush`).
    var flushScheduled = false
    /// IMLink frames of this turn, encoded and not yet handed to their channel (see `write`).
    var outgoing: (channel: Channel, bytes: ByteBuffer)?
    /// Encoded frames go to the channel in pieces of about this size at most.
    static let handOverBytes = 16 * 1024
    /// With `protocol = "mqtt"`: what the MQTT adapter keeps between connections.
    let mqttMemory = MQTTLinkMemory()

    init(
        configuration: LinkConfiguration,
        validated: LinkConfiguration.Validated,
        tls: LinkTLS?,
        loop: EventLoop,
        pool: NIOThreadPool,
        traffic: LinkTraffic = LinkTraffic(),
        logger: Logger
    ) {
        self.traffic = traffic
        self.configuration = configuration
        self.tls = tls
        self.loop = loop
        self.pool = pool
        self.logger = logger
        self.machine = Machine(configuration: validated.machine, random: SystemRandomNumberGenerator())
        self.heartbeat = Heartbeat(configuration: validated.heartbeat, random: SystemRandomNumberGenerator())
        self.resolveCache = ResolveCache(lifetime: configuration.resolveCacheLifetime)
        self.pathProber = PathProber(loop: loop, reconnect: validated.machine.reconnect)
        pathProber.onPathBack = { [weak self] reason in self?.pathBack(reason) }
    }

    // MARK: Inputs from the facade

    func start() { run(machine.start(now: .now)) }
    func userConnect() { run(machine.userConnect(now: .now)) }
    func userDisconnect() { run(machine.userDisconnect(now: .now)) }
    func userReconnect() { run(machine.userReconnect(now: .now)) }

    func shutdown(promise: EventLoopPromise<Void>) {
        shutdownPromises.append(promise)
        run(machine.shutdown(now: .now))
        finishShutdownIfStopped()
    }

    func network(_ event: NetworkEvent) {
        let now = MonotonicInstant.now
        logger.info("\(event)")
        switch event {
        case .up:
            resolveCache.removeAll()
            run(machine.networkUp(now: now))
        case .down:
            run(machine.networkDown(now: now))
        case .changed:
            // A new path: old answers and old failures say nothing about it,
            // and a live link must prove itself on the new path at once.
            resolveCache.removeAll()
            run(machine.networkUp(now: now))
            perform(heartbeat.networkChanged(now: now))
        }
    }

    /// A session waited too long for an ACK: test the link now.
    func sessionProtocolViolation(_ reason: String) {
        guard let connection, !connection.closing else { return }
        run(machine.protocolViolation(connection.attempt, code: .protocolError, reason: reason, now: .now))
    }

    /// Inbound data waits for the store: stop reading (the kernel's buffers fill and TCP
    /// pushes back on the server) until the sessions say to read again; kept for a new link.
    func setReading(_ on: Bool) {
        readingPaused = !on
        guard let channel = connection?.channel else { return }
        try? channel.syncOptions?.setOption(ChannelOptions.autoRead, value: on)
        if on { channel.read() }
    }

    /// The daemon's own store failed under the link: close without ERROR, back off, resume.
    func localFailure(_ reason: String) {
        guard let connection, !connection.closing else { return }
        run(machine.localFailure(connection.attempt, reason: reason, now: .now))
    }

    func sessionsActive(_ active: Bool) { perform(heartbeat.sessionsActive(active, now: .now)) }

    func send(_ frame: Frame) -> Bool {
        guard machine.phase.isConnected, let connection, !connection.closing, connection.channel != nil else {
            return false
        }
        if case .data(let data) = frame, data.body.readableBytes > Int(connection.serverMaxFrame) {
            return false
        }
        write(frame)
        return true
    }
}

extension MonotonicInstant {
    var nioDeadline: NIODeadline {
        NIODeadline.uptimeNanoseconds(UInt64(max(0, sinceOrigin.wholeNanoseconds)))
    }
}
