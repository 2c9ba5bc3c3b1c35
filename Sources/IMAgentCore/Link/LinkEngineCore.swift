import IMLink
import Logging
import MQTT5
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
    private struct Connection {
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
    private let tls: LinkTLS?
    private let pool: NIOThreadPool
    private let logger: Logger
    private var machine: Machine
    private var heartbeat: Heartbeat
    private var suspend = SuspendDetector()
    private let pathProber: PathProber
    private var resolveCache: ResolveCache
    private var token: [UInt8]?
    private var linkTimers: [LinkTimerID: Scheduled<Void>] = [:]
    private var heartbeatTimer: Scheduled<Void>?
    private var connection: Connection?
    /// The endpoint the attempt in its resolve or TCP stage is for.
    private var attemptEndpoint: (attempt: AttemptID, endpoint: Endpoint)?

    // Status bookkeeping.
    private var connectedSinceUnixMS: UInt64?
    private var establishedCount = 0
    private var attempts = 0
    private var lastError: String?
    /// Transitions logged at info since probing began (see `transitioned`).
    private var probingLogged = 0
    private static let probeTransitionsLogged = 6

    /// Frames and bytes each way, for the metrics (the engine's, shared by its cores).
    let traffic: LinkTraffic

    /// The sessions asked not to read from the link (see `setReading`).
    private var readingPaused = false

    /// The server's clock minus ours at the last LOGIN_OK (ms), from its SERVER_TIME.
    private var serverClockOffsetMS: Int64?
    /// When the server's TLS certificate of the last handshake expires (Unix ms).
    private var serverCertificateNotAfterUnixMS: UInt64?

    // Outputs.
    weak var sessionDelegate: LinkSessionDelegate?
    var onTransition: ((LinkTransition) -> Void)?
    /// The heartbeat interval (and smoothed RTT) whenever the interval changes on a connected link.
    var onHeartbeat: ((Duration, Duration?) -> Void)?
    private var reportedInterval: Duration?
    /// RTT samples already handed to `traffic.rttSampled`.
    private var reportedSamples = 0
    private var streams: [Int: AsyncStream<LinkTransition>.Continuation] = [:]
    private var nextStreamKey = 0
    private var shutdownPromises: [EventLoopPromise<Void>] = []

    // The action queue: an action whose performance produces another event
    // (a cached token, say) appends that event's actions behind the current
    // list, so actions always run in the order the cores returned them.
    private var pending: [LinkAction] = []
    private var draining = false
    /// A flush of the link's channel is queued on the loop (see `scheduleFlush`).
    private var flushScheduled = false
    /// With `protocol = "mqtt"`: what the MQTT adapter keeps between connections.
    private let mqttMemory = MQTTLinkMemory()

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

    var status: LinkStatus {
        let phase = machine.phase
        var status = LinkStatus(phase: phase)
        switch phase {
        case .connecting(_, let endpoint), .connected(let endpoint):
            status.endpoint = endpoint.description
        case .stopped, .waitingToReconnect, .waitingForNetwork, .disconnecting:
            status.endpoint = connection?.endpoint.description
        }
        if phase.isConnected {
            status.connectedSinceUnixMS = connectedSinceUnixMS
            status.heartbeatInterval = heartbeat.interval
        }
        status.smoothedRTT = heartbeat.rtt.smoothed
        status.reconnectCount = max(0, establishedCount - 1)
        status.attempts = attempts
        status.lastError = lastError
        status.serverClockOffsetMS = serverClockOffsetMS
        status.serverCertificateNotAfterUnixMS = serverCertificateNotAfterUnixMS
        return status
    }

    func addStream(_ continuation: AsyncStream<LinkTransition>.Continuation) -> Int {
        let key = nextStreamKey
        nextStreamKey += 1
        streams[key] = continuation
        return key
    }

    func removeStream(_ key: Int) { streams[key] = nil }

    // MARK: Inputs from the channel handler

    func received(_ frame: Frame, on attempt: AttemptID) {
        guard var current = connection, current.attempt == attempt, !current.closing else { return }
        let now = MonotonicInstant.now
        // Any frame is proof of life; a PING is answered in every phase.
        switch frame {
        case .ping(let ping):
            perform(heartbeat.frameReceived(now: now))
            write(.pong(ping))
        case .pong(let pong):
            perform(heartbeat.pongReceived(id: pong.id, now: now))
        case .hello, .helloOK, .login, .loginOK, .loginFail, .goaway, .error, .open, .openOK, .openFail, .close,
            .data, .ack, .window:
            perform(heartbeat.frameReceived(now: now))
        }

        switch frame {
        case .ping, .pong:
            break
        case .helloOK(let ok):
            let result = HelloResult(version: ok.version, features: ok.features, maxFrame: ok.maxFrame)
            current.negotiated = result
            current.serverMaxFrame = min(ok.maxFrame, FrameHeader.maxNegotiableBody)
            // Seed the RTT: HELLO→HELLO_OK is one round trip (plus the
            // server's negligible work), so the first PONG deadline is
            // already fitted to the path.
            if configuration.mqtt == nil, let sent = current.helloSentAt { heartbeat.seedRTT(sample: now - sent) }
            connection = current
            run(machine.helloOK(attempt, result, now: now))
            if case .connecting(.login, _) = machine.phase {
                current.limit.maxBody = configuration.maxFrame
            }
        case .loginOK(let ok):
            if configuration.mqtt != nil {
                // The broker's Maximum Packet Size, less an `up` PUBLISH's overhead, is its MAX_FRAME.
                if let maxBody = mqttMemory.maxBody { current.serverMaxFrame = min(current.serverMaxFrame, maxBody) }
                connection = current
                if let sent = current.loginSentAt { heartbeat.seedRTT(sample: now - sent) }
            }
            serverClockOffsetMS = ok.serverTimeMS.map { Int64(clamping: $0) - Int64(clamping: unixMilliseconds()) }
            run(machine.loginOK(attempt, heartbeat: ok.heartbeatMS.map { .milliseconds(Int64($0)) }, now: now))
        case .loginFail(let fail):
            lastError = "LOGIN_FAIL \(fail.code)" + (fail.message.map { ": \($0)" } ?? "")
            run(machine.loginFail(attempt, code: fail.code, retryAfter: fail.retryAfterMS.map { .milliseconds(Int64($0)) }, now: now))
        case .goaway(let goaway):
            var redirect: Endpoint?
            if let text = goaway.redirect {
                redirect = Endpoint(parsing: text)
                if redirect == nil { logger.warning("GOAWAY REDIRECT \"\(text)\" is not host:port; ignoring it") }
            }
            run(machine.goaway(
                attempt,
                code: goaway.code,
                retryAfter: goaway.retryAfterMS.map { .milliseconds(Int64($0)) },
                redirect: redirect,
                now: now
            ))
        case .error(let error) where error.session == 0:
            lastError = "ERROR \(error.code)" + (error.message.map { ": \($0)" } ?? "")
            run(machine.errorFrame(attempt, code: error.code, now: now))
        case .error, .openOK, .openFail, .close, .data, .ack, .window:
            guard machine.phase.isConnected else {
                run(machine.protocolViolation(attempt, code: .protocolError, reason: "\(frame.type) before LOGIN_OK", now: now))
                return
            }
            sessionDelegate?.received(frame)
        case .hello, .login, .open:
            run(machine.protocolViolation(attempt, code: .protocolError, reason: "\(frame.type) is sent by agents only", now: now))
        }
    }

    func tlsHandshakeCompleted(on attempt: AttemptID, negotiatedProtocol: String?, certificateNotAfterUnixMS: UInt64? = nil) {
        guard let current = connection, current.attempt == attempt, !current.closing else { return }
        serverCertificateNotAfterUnixMS = certificateNotAfterUnixMS
        // A server without ALPN says nothing; one that picked another
        // protocol is not an IMLink server.
        let expected = tls?.applicationProtocol ?? LinkTLS.alpn
        if let negotiatedProtocol, negotiatedProtocol != expected {
            failConnection(attempt, reason: "TLS: server chose ALPN \(negotiatedProtocol), not \(expected)")
            return
        }
        run(machine.tlsEstablished(attempt, now: .now))
    }

    func channelFailed(_ attempt: AttemptID, error: any Error) {
        guard let current = connection, current.attempt == attempt, !current.closing else { return }
        if let violation = error as? IMLinkError {
            lastError = "protocol violation: \(violation)"
            run(machine.protocolViolation(attempt, code: violation.code, reason: "\(violation)", now: .now))
        } else {
            failConnection(attempt, reason: "\(error)")
        }
    }

    func channelClosed(_ attempt: AttemptID) {
        guard let current = connection, current.attempt == attempt else { return }
        connection = nil
        run(machine.connectionClosed(attempt, reason: current.closeReason ?? "closed by the server", now: .now))
    }

    // MARK: Performing actions

    private func run(_ actions: [LinkAction]) {
        pending.append(contentsOf: actions)
        guard !draining else { return }
        draining = true
        defer { draining = false }
        while !pending.isEmpty {
            perform(pending.removeFirst())
        }
    }

    private func perform(_ action: LinkAction) {
        let now = MonotonicInstant.now
        switch action {
        case .obtainToken(let attempt, let dropCached):
            attempts += 1
            obtainToken(attempt, dropCached: dropCached)
        case .resolve(let attempt, let endpoint):
            attemptEndpoint = (attempt, endpoint)
            resolve(attempt, endpoint, now: now)
        case .connectTCP(let attempt, let addresses, let timeout):
            connectTCP(attempt, addresses, timeout: timeout)
        case .startTLS(let attempt, let endpoint):
            startTLS(attempt, endpoint)
        case .sendHello(let attempt):
            guard connection?.attempt == attempt else { return }
            connection?.helloSentAt = now
            let versions = machine.configuration.versions
            write(.hello(Hello(
                versionMin: versions.lowerBound,
                versionMax: versions.upperBound,
                features: [.deflate, .flow],
                agentID: configuration.agentID,
                agentVersion: configuration.agentVersion,
                maxFrame: configuration.maxFrame
            )))
        case .sendLogin(let attempt):
            guard connection?.attempt == attempt else { return }
            guard let token else {
                failConnection(attempt, reason: "no token at the login stage")
                return
            }
            connection?.loginSentAt = now
            write(.login(Login(token: ByteBuffer(bytes: token), agentID: configuration.agentID)))
        case .startHeartbeat(_, let serverCeiling):
            perform(heartbeat.linkEstablished(serverCeiling: serverCeiling, now: now))
        case .reopenSessions(let attempt):
            guard let current = connection, current.attempt == attempt, let negotiated = current.negotiated else { return }
            sessionDelegate?.linkEstablished(negotiated: negotiated, serverMaxFrame: current.serverMaxFrame)
        case .closeConnection(let attempt, let sendError):
            closeConnection(attempt, sendError: sendError)
        case .abandonAttempt:
            // Token and resolve work cannot be interrupted on the pool; their
            // late results carry the old attempt and the machine ignores them.
            break
        case .armTimer(let id, let deadline, let purpose):
            linkTimers[id] = loop.assumeIsolated().scheduleTask(deadline: deadline.nioDeadline) { [self] in
                linkTimers[id] = nil
                sampleSuspend()
                let now = MonotonicInstant.now
                switch purpose {
                case .stageDeadline: run(machine.stageDeadlinePassed(id, now: now))
                case .backoff: run(machine.backoffElapsed(id, now: now))
                }
            }
        case .cancelTimer(let id):
            linkTimers.removeValue(forKey: id)?.cancel()
        case .stateChanged(let from, let to, let reason):
            transitioned(from: from, to: to, reason: reason)
        case .ignored(let reason):
            logger.debug("ignored: \(reason)")
        }
    }

    private func perform(_ action: Heartbeat.Action) {
        defer {
            reportHeartbeat()
            reportRTTSample()
            watchPath()
        }
        switch action {
        case .none:
            break
        case .armTimer(let id, let deadline):
            armHeartbeatTimer(id, deadline: deadline)
        case .sendPing(let id, let timer, let pongDeadline):
            write(.ping(Ping(id: id, timestampUS: monotonicNanoseconds() / 1000)))
            armHeartbeatTimer(timer, deadline: pongDeadline)
        case .linkDead(let reason):
            heartbeatTimer?.cancel()
            heartbeatTimer = nil
            guard let attempt = connection?.attempt else { return }
            lastError = "heartbeat: \(reason)"
            logger.warning("link dead: \(reason)")
            run(machine.heartbeatTimedOut(attempt, now: .now))
        }
    }

    /// A probe beside the link while it owes a reply past the ACK deadline (`PathProbe`).
    private func watchPath() {
        let owed = machine.phase.isConnected ? heartbeat.replyOwedSince : nil
        pathProber.update(replyOwedSince: owed, ackDeadline: heartbeat.rtt.ackDeadline, remote: connection?.channel?.remoteAddress)
    }

    /// A probe got through while the link was silent: replace the link.
    private func pathBack(_ reason: String) {
        guard let connection, !connection.closing, machine.phase.isConnected else { return }
        logger.info("\(reason); replacing the link")
        run(machine.pathReturned(connection.attempt, reason: reason, now: .now))
    }

    /// WATCH hears every change of the interval (adaptation, activity, the server's ceiling).
    private func reportHeartbeat() {
        guard machine.phase.isConnected else {
            reportedInterval = nil
            return
        }
        let interval = heartbeat.interval
        guard interval != reportedInterval else { return }
        reportedInterval = interval
        onHeartbeat?(interval, heartbeat.rtt.smoothed)
    }

    /// The metrics hear each RTT sample once (a PONG's, or HELLO_OK's seed before the heartbeat starts).
    private func reportRTTSample() {
        guard heartbeat.rtt.samples != reportedSamples else { return }
        reportedSamples = heartbeat.rtt.samples
        if let sample = heartbeat.rtt.latest { traffic.rttSampled?(sample) }
    }

    private func armHeartbeatTimer(_ id: Heartbeat.TimerID, deadline: MonotonicInstant) {
        heartbeatTimer?.cancel()
        heartbeatTimer = loop.assumeIsolated().scheduleTask(deadline: deadline.nioDeadline) { [self] in
            heartbeatTimer = nil
            sampleSuspend()
            perform(heartbeat.timerFired(id, now: .now))
        }
    }

    /// Sampled only when a timer fires anyway: suspend detection costs no wake-up.
    private func sampleSuspend() {
        guard let slept = suspend.sample(boottimeNanoseconds: boottimeNanoseconds(), monotonicNanoseconds: monotonicNanoseconds()) else {
            return
        }
        logger.info("resumed after about \(slept) of suspend; testing the link")
        perform(heartbeat.resumedFromSuspend(now: .now))
    }

    private func obtainToken(_ attempt: AttemptID, dropCached: Bool) {
        if dropCached { token = nil }
        if token != nil {
            run(machine.tokenObtained(attempt, now: .now))
            return
        }
        let source = configuration.token
        let timeout = configuration.stageTimeout
        pool.runIfActive(eventLoop: loop) { () throws -> [UInt8] in
            try source.read(timeout: timeout)
        }.assumeIsolated().whenComplete { [self] result in
            switch result {
            case .success(let fresh):
                token = fresh
                run(machine.tokenObtained(attempt, now: .now))
            case .failure(let error):
                lastError = "token: \(error)"
                run(machine.stageFailed(attempt, stage: .token, reason: "\(error)", now: .now))
            }
        }
    }

    private func resolve(_ attempt: AttemptID, _ endpoint: Endpoint, now: MonotonicInstant) {
        if isIPLiteral(endpoint.host) {
            run(machine.resolved(attempt, addresses: [ResolvedAddress(ip: endpoint.host, port: endpoint.port)], now: now))
            return
        }
        if let cached = resolveCache.lookup(endpoint, now: now) {
            run(machine.resolved(attempt, addresses: cached, now: now))
            return
        }
        pool.runIfActive(eventLoop: loop) { () throws -> [ResolvedAddress] in
            try AddressResolution.resolve(endpoint)
        }.assumeIsolated().whenComplete { [self] result in
            let now = MonotonicInstant.now
            switch result {
            case .success(let addresses):
                if !addresses.isEmpty { resolveCache.store(addresses, for: endpoint, now: now) }
                run(machine.resolved(attempt, addresses: addresses, now: now))
            case .failure(let error):
                lastError = "resolve: \(error)"
                run(machine.stageFailed(attempt, stage: .resolve, reason: "\(error)", now: now))
            }
        }
    }

    private func connectTCP(_ attempt: AttemptID, _ addresses: [ResolvedAddress], timeout: Duration) {
        // The machine's phase may already be ahead of the action being
        // performed (actions are queued), so the endpoint comes from the
        // resolve action of the same attempt.
        guard let (resolvedAttempt, endpoint) = attemptEndpoint, resolvedAttempt == attempt else {
            preconditionFailure("the state machine asks for TCP only after resolving the same attempt")
        }
        let limit = FrameLimit()
        connection = Connection(attempt: attempt, endpoint: endpoint, limit: limit)
        let mqtt = makeMQTTHandler(endpoint: endpoint)
        let handlerParts = NIOLoopBound((self, limit, mqtt), eventLoop: loop)
        // As long as the stage's deadline (short for a probe): the socket
        // never outlives its attempt, so one connect is in flight at a time.
        ClientBootstrap(group: loop)
            .resolver(PrefetchedResolver(addresses: addresses, loop: loop))
            .connectTimeout(.nanoseconds(timeout.wholeNanoseconds))
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let (engine, limit, mqtt) = handlerParts.value
                    if let (handler, maxPacketSize) = mqtt {
                        // The MQTT adapter below the engine: the same frames above it, MQTT 5 below.
                        return try channel.pipeline.syncOperations.addHandlers(
                            LinkByteCounter(engine.traffic),
                            ByteToMessageHandler(MQTT5PacketDecoder(maxPacketSize: Int(maxPacketSize))),
                            MessageToByteHandler(MQTT5PacketEncoder()),
                            handler,
                            LinkFrameCounter(engine.traffic),
                            LinkChannelHandler(attempt: attempt, engine: engine)
                        )
                    }
                    try channel.pipeline.syncOperations.addHandlers(
                        LinkByteCounter(engine.traffic),
                        ByteToMessageHandler(NegotiatedFrameDecoder(limit: limit)),
                        MessageToByteHandler(IMLinkFrameEncoder()),
                        LinkFrameCounter(engine.traffic),
                        LinkChannelHandler(attempt: attempt, engine: engine)
                    )
                }
            }
            .connect(host: endpoint.host, port: Int(endpoint.port))
            .assumeIsolated()
            .whenComplete { [self] result in
                switch result {
                case .success(let channel):
                    guard var current = connection, current.attempt == attempt, current.channel == nil,
                        !current.closing, channel.isActive
                    else {
                        // The attempt was abandoned or is being closed (its close
                        // is reported already), or the socket died at once (then
                        // `channelClosed` already reported it).
                        channel.close(promise: nil)
                        return
                    }
                    current.channel = channel
                    if readingPaused { try? channel.syncOptions?.setOption(ChannelOptions.autoRead, value: false) }
                    connection = current
                    run(machine.tcpConnected(attempt, now: .now))
                case .failure(let error):
                    // A closing attempt is left to `closeConnection`'s report: the
                    // stage deadline and the connect timeout are equally long, so
                    // the deadline's close is often first, and taking the
                    // connection here would swallow the one `connectionClosed`
                    // the machine waits for, leaving it disconnecting for good.
                    guard let current = connection, current.attempt == attempt, current.channel == nil,
                        !current.closing
                    else { return }
                    connection = nil
                    lastError = "tcp: \(error)"
                    run(machine.stageFailed(attempt, stage: .tcp, reason: "\(error)", pathSilent: isSilent(error), now: .now))
                }
            }
    }

    /// With `protocol = "mqtt"`, the adapter for a new connection and the largest packet it accepts.
    private func makeMQTTHandler(endpoint: Endpoint) -> (MQTTLinkHandler, UInt32)? {
        guard let settings = configuration.mqtt, let topics = try? settings.topics() else { return nil }
        let adapter = MQTTLinkAdapter(settings: settings, topics: topics,
                                      keepAlive: MQTTLinkSettings.keepAlive(heartbeatMax: configuration.heartbeatMax),
                                      maxFrame: configuration.maxFrame, port: endpoint.port, lastAcked: mqttMemory.lastAcked,
                                      noSubscriberStreak: mqttMemory.noSubscriberStreak)
        return (MQTTLinkHandler(adapter: adapter, memory: mqttMemory, logger: logger), adapter.maximumPacketSize)
    }

    private func startTLS(_ attempt: AttemptID, _ endpoint: Endpoint) {
        guard let current = connection, current.attempt == attempt, let channel = current.channel else { return }
        guard let tls else { preconditionFailure("the state machine asks for TLS only when it is configured") }
        do {
            try channel.pipeline.syncOperations.addHandler(try tls.makeHandler(for: endpoint), position: .first)
        } catch {
            failConnection(attempt, reason: "TLS: \(error)")
        }
    }

    /// The one error path for a socket: remember why, close it; the close
    /// reaches the state machine as `connectionClosed` with that reason.
    private func failConnection(_ attempt: AttemptID, reason: String) {
        guard var current = connection, current.attempt == attempt else { return }
        logger.debug("closing \(attempt): \(reason)")
        lastError = reason
        if current.closeReason == nil { current.closeReason = reason }
        current.closing = true
        connection = current
        if let channel = current.channel {
            channel.close(promise: nil)
        } else {
            channelClosedLater(attempt)
        }
    }

    private func closeConnection(_ attempt: AttemptID, sendError: WireCode?) {
        guard var current = connection, current.attempt == attempt else {
            // Already gone (closed by the peer in the same loop tick): the
            // machine still waits for its one `connectionClosed`.
            let late = loop.assumeIsolated()
            late.execute { [self] in run(machine.connectionClosed(attempt, reason: "already closed", now: .now)) }
            return
        }
        current.closing = true
        if current.closeReason == nil { current.closeReason = "closed by the agent" }
        connection = current
        guard let channel = current.channel else {
            // Still connecting: the connect result will find the attempt
            // gone and close its socket.
            channelClosedLater(attempt)
            return
        }
        if let sendError {
            channel.write(Frame.error(ErrorFrame(code: sendError)), promise: nil)
        }
        channel.flush()
        channel.close(promise: nil)
    }

    /// Reports the close of an attempt without a socket on the next loop
    /// tick, so the machine hears it after the actions it is performing.
    private func channelClosedLater(_ attempt: AttemptID) {
        loop.assumeIsolated().execute { [self] in channelClosed(attempt) }
    }

    private func write(_ frame: Frame) {
        guard let channel = connection?.channel else { return }
        channel.write(frame, promise: nil)
        scheduleFlush(channel)
        perform(heartbeat.frameSent(now: .now, awaitsReply: frame.awaitsReply))
    }

    /// One flush (one `writev`) for every frame written in this turn of the loop:
    /// the DATA frames of a group commit, the ACKs of a flush, go out together.
    private func scheduleFlush(_ channel: Channel) {
        guard !flushScheduled else { return }
        flushScheduled = true
        loop.assumeIsolated().execute { [self] in
            flushScheduled = false
            channel.flush()
            // A new connection written to in the same turn (not seen so far, but cheap to cover).
            if let current = connection?.channel, current !== channel { current.flush() }
        }
    }

    private func transitioned(from: LinkPhase, to: LinkPhase, reason: String) {
        // Probing a silent path makes five transitions every 1–2 s: the
        // first round is logged at info, the rest at debug, until it ends.
        let quiet = machine.probing && probingLogged >= Self.probeTransitionsLogged
        probingLogged = machine.probing ? probingLogged + 1 : 0
        logger.log(level: quiet ? .debug : .info, "link: \(from) → \(to): \(reason)")
        switch to {
        case .connected:
            establishedCount += 1
            traffic.linkEstablished()
            connectedSinceUnixMS = unixMilliseconds()
        case .disconnecting, .waitingToReconnect, .waitingForNetwork, .stopped(.refused):
            lastError = reason
        case .stopped, .connecting:
            break
        }
        if from.isConnected && !to.isConnected {
            // A death the policy declared already left it down; any other
            // loss tells the NAT prober how long the link had been idle.
            perform(heartbeat.connectionLost(now: .now))
            heartbeatTimer?.cancel()
            heartbeatTimer = nil
            connectedSinceUnixMS = nil
            traffic.linkLost(machine.lastFailure)
            sessionDelegate?.linkLost(reason: reason)
        }
        var snapshot = status
        snapshot.state = to.shortName
        snapshot.detail = to.description
        let transition = LinkTransition(from: from, to: to, reason: reason, status: snapshot)
        onTransition?(transition)
        for continuation in streams.values { continuation.yield(transition) }
        finishShutdownIfStopped()
    }

    private func finishShutdownIfStopped() {
        guard case .stopped(.shutdown) = machine.phase, !shutdownPromises.isEmpty else { return }
        for timer in linkTimers.values { timer.cancel() }
        linkTimers.removeAll()
        heartbeatTimer?.cancel()
        heartbeatTimer = nil
        pathProber.stop()
        for continuation in streams.values { continuation.finish() }
        streams.removeAll()
        let promises = shutdownPromises
        shutdownPromises.removeAll()
        for promise in promises { promise.succeed() }
    }
}

extension MonotonicInstant {
    var nioDeadline: NIODeadline {
        NIODeadline.uptimeNanoseconds(UInt64(max(0, sinceOrigin.wholeNanoseconds)))
    }
}

private extension Frame {
    /// Whether the server must answer this frame (wire.md sections 4–5), so
    /// that silence after it is a reason to suspect the link.
    var awaitsReply: Bool {
        switch self {
        case .data, .open: true
        case .hello, .helloOK, .login, .loginOK, .loginFail, .ping, .pong, .goaway, .error, .openOK, .openFail,
            .close, .ack, .window:
            // PINGs have their own deadline; the handshake has its stages' deadlines.
            false
        }
    }
}
