/// The link's state as people read it, in `imagent status`, STATUS and the
/// unit's `STATUS=` line: "reconnecting in 4 s (connection refused)", and
/// what happens next or what to do. Pure: the caller passes the clocks.
extension LinkStatus {
    /// The unconfigured state: the daemon serves its socket but has no link to run.
    static func unconfigured(_ reason: String) -> LinkStatus {
        var status = LinkStatus(phase: .stopped(.notStarted))
        status.state = "unconfigured"
        status.unconfigured = reason
        status.detail = "unconfigured: \(reason)"
        return status
    }

    /// One sentence for the state. `now` is the monotonic clock (for the backoff's countdown).
    func sentence(now: MonotonicInstant) -> String {
        if let unconfigured { return "unconfigured: \(unconfigured)" }
        let cause = lastError.map { " (\(Self.plain($0)))" } ?? ""
        switch phase {
        case .stopped(.notStarted): return "not started yet"
        case .stopped(.userDisconnected): return "disconnected by an administrator"
        case .stopped(.refused(let code)): return "refused by the server (\(code))" + (lastError.map { ": \(Self.plain($0))" } ?? "")
        case .stopped(.shutdown): return "shut down"
        case .waitingToReconnect(let until): return "reconnecting in \(Self.seconds(until - now))\(cause)"
        case .waitingForNetwork: return "waiting for the network\(cause)"
        case .connecting(let stage, let endpoint): return "connecting to \(endpoint) (\(Self.stageName(stage)))"
        case .connected(let endpoint): return "connected to \(endpoint)"
        case .disconnecting: return "disconnecting\(cause)"
        }
    }

    /// What happens next, or what the operator should do; nil while connected.
    func nextStep(now: MonotonicInstant) -> String? {
        if unconfigured != nil {
            return "set [server] endpoints and a token ([auth]) in the configuration file, then run `imagent reload`"
        }
        switch phase {
        case .stopped(.notStarted): return "the link starts with the daemon"
        case .stopped(.userDisconnected): return "run `imagent connect` to bring the link up"
        case .stopped(.refused): return "check the token ([auth]) and the agent id, then run `imagent connect`"
        case .stopped(.shutdown): return nil
        case .waitingToReconnect(let until): return "next attempt in \(Self.seconds(until - now)); `imagent connect` tries at once"
        case .waitingForNetwork: return "connects when a route to the server appears"
        case .connecting: return "waiting for the \(endpoint ?? "server")'s answer"
        case .connected: return nil
        case .disconnecting: return "reconnects once the connection is closed"
        }
    }

    /// For systemd's STATUS= line, which stays until the next change: the
    /// countdown as a time of day (UTC), which does not go stale.
    func systemdSentence(now: MonotonicInstant, wallNowMS: UInt64) -> String {
        guard unconfigured == nil, case .waitingToReconnect(let until) = phase else {
            if let unconfigured { return "unconfigured: \(unconfigured); then `imagent reload`" }
            return sentence(now: now)
        }
        let remaining = max(Duration.zero, until - now)
        let atMS = wallNowMS + UInt64(remaining.wholeNanoseconds / 1_000_000)
        return "reconnecting at \(Self.timeOfDay(unixMS: atMS)) UTC" + (lastError.map { " (\(Self.plain($0)))" } ?? "")
    }

    /// "4 s", "1 min 5 s": rounded up, as a countdown reads.
    static func seconds(_ duration: Duration) -> String {
        let nanoseconds = max(0, duration.wholeNanoseconds)
        let whole = Int((nanoseconds + 999_999_999) / 1_000_000_000)
        if whole < 60 { return "\(whole) s" }
        return "\(whole / 60) min" + (whole % 60 == 0 ? "" : " \(whole % 60) s")
    }

    static func timeOfDay(unixMS: UInt64) -> String {
        let second = unixMS / 1000 % 86_400
        func two(_ value: UInt64) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(two(second / 3600)):\(two(second % 3600 / 60)):\(two(second % 60))"
    }

    private static func stageName(_ stage: ConnectStage) -> String {
        switch stage {
        case .token: "reading the token"
        case .resolve: "resolving"
        case .tcp: "TCP"
        case .tls: "TLS handshake"
        case .hello: "HELLO"
        case .login: "LOGIN"
        }
    }

    /// The cause of a failure without the socket layer's wrapping:
    /// "tcp: connect(descriptor:addr:size:): Connection refused (errno: 111)"
    /// reads "connection refused".
    static func plain(_ error: String) -> String {
        let known = [
            "Connection refused", "Connection reset by peer", "Connection timed out", "No route to host",
            "Network is unreachable", "Host is unreachable", "Broken pipe", "Permission denied",
        ]
        // A byte search, not `error.contains(phrase)`: that one lives in _StringProcessing, which the
        // daemon does not link (the regex engine, 800 KiB of text).
        let bytes = error.utf8
        for phrase in known where bytes.indices.contains(where: { bytes[$0...].starts(with: phrase.utf8) }) {
            return phrase.prefix(1).lowercased() + phrase.dropFirst()
        }
        let line = error.split(separator: "\n").first.map(String.init) ?? error
        return line.utf8.count > 160 ? String(line.prefix(157)) + "…" : line
    }
}
