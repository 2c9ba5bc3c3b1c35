/// How long each connect stage took: a stage ends when a later one begins or the link is up.
struct ConnectStageTimer {
    private var current: (stage: ConnectStage, since: ContinuousClock.Instant)?

    /// The link entered `phase` at `now`: the stage this ends and how long it took, if one did.
    mutating func enter(_ phase: LinkPhase, at now: ContinuousClock.Instant) -> (stage: ConnectStage, took: Duration)? {
        var ended: (stage: ConnectStage, took: Duration)?
        if let current {
            switch phase {
            case .connecting(let next, _) where next.rawValue > current.stage.rawValue:
                ended = (current.stage, now - current.since)
            case .connected:
                ended = (current.stage, now - current.since)
            case .connecting, .stopped, .waitingToReconnect, .waitingForNetwork, .disconnecting:
                break
            }
        }
        if case .connecting(let stage, _) = phase {
            if current?.stage != stage { current = (stage, now) }
        } else {
            current = nil
        }
        return ended
    }
}
