import NIOCore

/// Decides what an idle connection has coming to it, from its last traffic.
///
/// Pure, so the rules are tested with plain numbers:
///
/// | condition                                             | verdict        |
/// |-------------------------------------------------------|----------------|
/// | black-holed for `blackHoleLinger`                     | `closeSilently`|
/// | no traffic either way for `natTimeout` (if set)       | `blackHole`    |
/// | nothing received for `silenceLimit`                   | `close`        |
/// | otherwise                                             | `keep`         |
struct IdlePolicy: Sendable {
    enum Verdict: Hashable, Sendable {
        case keep
        /// Emulate a NAT that forgot the mapping: drop everything both ways.
        case blackHole
        /// End a black-holed connection, without a frame.
        case closeSilently
        /// The agent went quiet past its heartbeat allowance.
        case close
    }

    var natTimeout: TimeAmount?
    /// How long a black-holed connection lingers before its socket is closed.
    var blackHoleLinger: TimeAmount

    /// The silence allowed once logged in: 3 × HEARTBEAT_MS (`wire.md` section 7).
    static func silenceLimit(heartbeatMS: UInt32) -> TimeAmount {
        .milliseconds(3 * Int64(heartbeatMS))
    }

    /// The silence allowed before LOGIN_OK, when the agent has no heartbeat
    /// yet: the agent's handshake deadline (10 s by default), or more.
    static func handshakeSilenceLimit(heartbeatMS: UInt32) -> TimeAmount {
        max(silenceLimit(heartbeatMS: heartbeatMS), .seconds(10))
    }

    func verdict(now: NIODeadline, lastReceived: NIODeadline, lastSent: NIODeadline,
                 silenceLimit: TimeAmount, blackHoledSince: NIODeadline?) -> Verdict {
        if let blackHoledSince {
            return now - blackHoledSince >= blackHoleLinger ? .closeSilently : .keep
        }
        if let natTimeout, now - max(lastReceived, lastSent) >= natTimeout {
            return .blackHole
        }
        if now - lastReceived >= silenceLimit {
            return .close
        }
        return .keep
    }
}
