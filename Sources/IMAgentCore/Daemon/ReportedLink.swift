/// The link as STATUS, METRICS, LINK_STATE and systemd report it: the engine's latest
/// transition, with counts that keep counting up across the reloads that replace the
/// engine, or why there is no link while the daemon runs unconfigured. A value: the
/// daemon feeds it transitions and reloads, with the time.
struct ReportedLink {
    private(set) var status: LinkStatus
    /// What the link lacks (endpoints, a usable token) while the daemon runs unconfigured; nil: configured.
    private(set) var unconfigured: String?
    /// A reload replaced the engine: the old one's closing steps do not change the status.
    private var replacedEngineClosing = false
    /// The replaced engines' counts.
    private var countOffset = (reconnects: 0, attempts: 0)
    /// Whether the current engine has been connected.
    private var everConnected = false

    init(unconfigured: String?) {
        self.unconfigured = unconfigured
        status = unconfigured.map(LinkStatus.unconfigured) ?? LinkStatus(phase: .stopped(.notStarted))
    }

    /// The engine moved from one phase to another. True when the status changed.
    mutating func apply(_ transition: LinkTransition, now: MonotonicInstant, nowMS: UInt64) -> Bool {
        // Until the new engine's first step, transitions are the old one closing.
        if replacedEngineClosing && transition.from == .stopped(.notStarted) { replacedEngineClosing = false }
        if case .connected = transition.to { everConnected = true }
        // While unconfigured, the old engine's last steps do not replace that state.
        guard unconfigured == nil, !replacedEngineClosing else { return false }
        var next = transition.status
        next.reconnectCount += countOffset.reconnects
        next.attempts += countOffset.attempts
        next.phase = transition.to
        next.detail = next.sentence(now: now)
        // The time of the last error is the time it first appeared.
        next.lastErrorAtUnixMS = next.lastError == nil ? nil : (next.lastError == status.lastError ? status.lastErrorAtUnixMS : nowMS)
        status = next
        return true
    }

    /// A reload replaces the engine: its counts go on from these, and its first connect is a
    /// reconnect when the old one had been up.
    mutating func replacingEngine() {
        countOffset = (status.reconnectCount + (everConnected ? 1 : 0), status.attempts)
        everConnected = false
        replacedEngineClosing = true
    }

    /// After a reload: what the link lacks now (nil: configured). True when the status changed.
    mutating func configured(lacking missing: String?) -> Bool {
        unconfigured = missing
        guard let missing else { return false }
        var next = LinkStatus.unconfigured(missing)
        next.reconnectCount = status.reconnectCount
        next.attempts = status.attempts
        status = next
        return true
    }

    /// The heartbeat's interval changed: STATUS and METRICS show the current one.
    mutating func heartbeat(interval: Duration, rtt: Duration?) {
        status.heartbeatInterval = interval
        status.smoothedRTT = rtt ?? status.smoothedRTT
    }
}
