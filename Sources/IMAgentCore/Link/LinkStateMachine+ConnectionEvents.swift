import IMLink

/// What happens to an established connection from below: the heartbeat finding
/// it dead, a probe finding the path back, and its socket closing.
extension LinkStateMachine {
    // MARK: Connection events

    /// The heartbeat declared the link dead (PONG missing).
    mutating func heartbeatTimedOut(_ attempt: AttemptID, now: MonotonicInstant) -> [LinkAction] {
        switch state {
        case .connected(let connected) where connected.attempt == attempt:
            let (next, why) = afterLinkDiedSilently(since: connected.since, now: now, "heartbeat: PONG missing")
            return close(attempt, sendError: nil, next: next, reason: why)
        case .stopped, .disconnected, .connecting, .connected, .disconnecting:
            return [.ignored(reason: "heartbeat timeout of \(attempt) while \(phase)")]
        }
    }

    /// A probe beside the suspected link got through after the path had been
    /// silent (`PathProbe`): the old connection waits on TCP's retransmission
    /// backoff, so it is closed and a new one made at once, like a link the
    /// heartbeat found dead (the backoff does not grow).
    mutating func pathReturned(_ attempt: AttemptID, reason: String, now: MonotonicInstant) -> [LinkAction] {
        switch state {
        case .connected(let connected) where connected.attempt == attempt:
            let (next, why) = afterLinkDiedSilently(since: connected.since, now: now, reason)
            return close(attempt, sendError: nil, next: next, reason: why)
        case .stopped, .disconnected, .connecting, .connected, .disconnecting:
            return [.ignored(reason: "path back for \(attempt) while \(phase)")]
        }
    }

    /// The socket of `attempt` is closed, by us or by the peer.
    mutating func connectionClosed(_ attempt: AttemptID, reason: String, now: MonotonicInstant) -> [LinkAction] {
        switch state {
        case .disconnecting(let disconnecting) where disconnecting.attempt == attempt:
            return proceed(to: disconnecting.next, reason: disconnecting.reason, now: now)
        case .connected(let connected) where connected.attempt == attempt:
            let (next, why) = afterLinkLost(since: connected.since, now: now, "connection closed: \(reason)")
            return proceed(to: next, reason: why, now: now)
        case .connecting(let connecting) where connecting.attempt == attempt && connecting.stage.holdsSocket:
            let (next, why) = afterEndpointFailure(connecting, "connection closed in \(connecting.stage): \(reason)")
            return [.cancelTimer(connecting.stageTimer)] + proceed(to: next, reason: why, now: now)
        case .stopped, .disconnected, .connecting, .connected, .disconnecting:
            return [.ignored(reason: "close of \(attempt) while \(phase): \(reason)")]
        }
    }
}
