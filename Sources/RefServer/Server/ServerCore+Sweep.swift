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

    /// Often enough to act within a quarter of the heartbeat allowance and within
    /// 1/40 of the NAT timeout (a middlebox that forgets at T must not let a
    /// PING at T + 0.2 s through, or NAT probing learns a value above T),
    /// never more than 100 times a second.
    private var sweepInterval: TimeAmount {
        var interval = TimeAmount.milliseconds(Int64(knobs.heartbeatMS))
        if let nat = knobs.natTimeout { interval = min(interval, .nanoseconds(nat.nanoseconds / 10)) }
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
