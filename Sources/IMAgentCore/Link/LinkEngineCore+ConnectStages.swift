import IMLink
import MQTT5
import NIOCore
import NIOPosix

/// The connect stages' I/O: the token command and getaddrinfo on the pool, the
/// TCP connect with its pipeline (IMLink, or MQTT 5 below the adapter), and TLS.
extension LinkEngineCore {
    func obtainToken(_ attempt: AttemptID, dropCached: Bool) {
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

    /// After TOKEN_INVALID: the token read again; a different one than the server refused cuts the backoff short.
    func checkTokenChanged() {
        guard let refused = token else { return }
        let source = configuration.token
        let timeout = configuration.stageTimeout
        pool.runIfActive(eventLoop: loop) { () throws -> [UInt8] in
            try source.read(timeout: timeout)
        }.assumeIsolated().whenComplete { [self] result in
            guard case .success(let fresh) = result, fresh != refused else { return }
            logger.notice("\(source) holds a different token than the one the server refused; connecting at once")
            run(machine.tokenChanged(now: .now))
        }
    }

    func resolve(_ attempt: AttemptID, _ endpoint: Endpoint, now: MonotonicInstant) {
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

    func connectTCP(_ attempt: AttemptID, _ addresses: [ResolvedAddress], timeout: Duration) {
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
                            ByteToMessageHandler(MQTTLinkPacketDecoder(maxPacketSize: Int(maxPacketSize))),
                            handler,
                            LinkFrameCounter(engine.traffic),
                            LinkChannelHandler(attempt: attempt, engine: engine)
                        )
                    }
                    try channel.pipeline.syncOperations.addHandlers(
                        LinkByteCounter(engine.traffic),
                        ByteToMessageHandler(NegotiatedFrameDecoder(limit: limit)),
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

    func startTLS(_ attempt: AttemptID, _ endpoint: Endpoint) {
        guard let current = connection, current.attempt == attempt, let channel = current.channel else { return }
        guard let tls else { preconditionFailure("the state machine asks for TLS only when it is configured") }
        do {
            try channel.pipeline.syncOperations.addHandler(try tls.makeHandler(for: endpoint), position: .first)
        } catch {
            failConnection(attempt, reason: "TLS: \(error)")
        }
    }
}
