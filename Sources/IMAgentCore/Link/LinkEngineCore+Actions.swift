import IMLink
import NIOCore

/// Performing the state machine's actions, in the order it returned them: the
/// action queue, the connect stages' work, HELLO and LOGIN, and its timers.
extension LinkEngineCore {
    // MARK: Performing actions

    func run(_ actions: [LinkAction]) {
        pending.append(contentsOf: actions)
        guard !draining else { return }
        draining = true
        defer { draining = false }
        while !pending.isEmpty {
            perform(pending.removeFirst())
        }
    }

    func perform(_ action: LinkAction) {
        let now = MonotonicInstant.now
        switch action {
        case .obtainToken(let attempt, let dropCached):
            attempts += 1
            obtainToken(attempt, dropCached: dropCached)
        case .checkTokenChanged:
            checkTokenChanged()
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
            sessionDelegate?.linkEstablished(negotiated: negotiated, serverMaxFrame: current.serverMaxFrame,
                                             serverKeepsAcknowledged: configuration.mqtt == nil)
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
}
