import IMLink
import NIOCore

/// Performing the heartbeat policy's actions (PINGs, its timer, a dead link),
/// the path probe beside a silent link, suspend detection, and reporting the
/// interval and RTT samples.
extension LinkEngineCore {
    func perform(_ action: Heartbeat.Action) {
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

    /// The heartbeat's answer to a frame in or out (`frameSent`, `frameReceived`): on every
    /// message, so only what a frame can change is looked at. A frame moves the reply owed
    /// (the path watch) and may arm the timer; the interval and the RTT samples change with
    /// PONGs, timers and activity only, which go through `perform`.
    func performAfterFrame(_ action: Heartbeat.Action) {
        switch action {
        case .none:
            break
        case .armTimer(let id, let deadline):
            armHeartbeatTimer(id, deadline: deadline)
        case .sendPing, .linkDead:
            perform(action)
            return
        }
        watchPath()
    }

    /// A probe beside the link while it owes a reply past the ACK deadline (`PathProbe`).
    private func watchPath() {
        let owed = machine.phase.isConnected ? heartbeat.replyOwedSince : nil
        pathProber.update(replyOwedSince: owed, ackDeadline: heartbeat.rtt.ackDeadline, remote: connection?.channel?.remoteAddress)
    }

    /// A probe got through while the link was silent: replace the link.
    func pathBack(_ reason: String) {
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
    func sampleSuspend() {
        guard let slept = suspend.sample(boottimeNanoseconds: boottimeNanoseconds(), monotonicNanoseconds: monotonicNanoseconds()) else {
            return
        }
        logger.info("resumed after about \(slept) of suspend; testing the link")
        perform(heartbeat.resumedFromSuspend(now: .now))
    }
}
