import NIOCore

/// The periodic look at idle connections: heartbeat allowance and the NAT emulation.
extension ServerCore {
    func startSweep() {
        sweepTask?.cancel()
        sweepTask = loop.assumeIsolated().scheduleTask(in: sweepInterval) {
            self.sweep()
            self.startSweep()
        }
    }

    /// Often enough to act within a quarter of the shortest timeout, never more than 100 times a second.
    private var sweepInterval: TimeAmount {
        var interval = TimeAmount.milliseconds(Int64(knobs.heartbeatMS))
        if let nat = knobs.natTimeout { interval = min(interval, nat) }
        return min(max(.nanoseconds(interval.nanoseconds / 4), .milliseconds(10)), .seconds(1))
    }

    private func sweep() {
        let policy = IdlePolicy(natTimeout: knobs.natTimeout, blackHoleLinger: configuration.blackHoleLinger)
        let now = NIODeadline.now()
        for handler in connections.values {
            switch policy.verdict(now: now, lastReceived: handler.lastReceived, lastSent: handler.lastSent,
                                  silenceLimit: handler.heartbeatMS.map(IdlePolicy.silenceLimit(heartbeatMS:))
                                      ?? IdlePolicy.handshakeSilenceLimit(heartbeatMS: knobs.heartbeatMS),
                                  blackHoledSince: handler.blackHoledSince) {
            case .keep:
                break
            case .blackHole:
                logger.debug("connection \(handler.id) idle past the NAT timeout: black-holing it")
                handler.blackHole(since: now)
            case .closeSilently:
                handler.closeSilently()
            case .close:
                // A stalled server reads nothing, so silence proves nothing then.
                guard configuration.closeIdleConnections, !knobs.stalled else { break }
                logger.info("connection \(handler.id) has been silent too long: closing it")
                handler.closeSilently()
            }
        }
    }
}
