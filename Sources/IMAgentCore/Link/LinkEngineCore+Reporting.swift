import IMLink
import NIOCore

/// What the engine tells the outside: its status, each transition (logged, to
/// the callbacks and the WATCH streams), and the end of a shutdown.
extension LinkEngineCore {
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
        if configuration.mqtt != nil { status.brokerGrant = mqttMemory.granted }
        return status
    }

    func addStream(_ continuation: AsyncStream<LinkTransition>.Continuation) -> Int {
        let key = nextStreamKey
        nextStreamKey += 1
        streams[key] = continuation
        return key
    }

    func removeStream(_ key: Int) { streams[key] = nil }

    func transitioned(from: LinkPhase, to: LinkPhase, reason: String) {
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
            sessionDelegate?.linkLost(reason: reason, cause: machine.lastFailure)
        }
        var snapshot = status
        snapshot.state = to.shortName
        snapshot.detail = to.description
        let transition = LinkTransition(from: from, to: to, reason: reason, status: snapshot)
        onTransition?(transition)
        for continuation in streams.values { continuation.yield(transition) }
        finishShutdownIfStopped()
    }

    func finishShutdownIfStopped() {
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
