import NIOCore

/// Decides what an idle connection has coming to it, from its last traffic.
///
/// Pure, so the rules are tested with plain numbers:
///
/// | condition                                             | verdict        |
/// |-------------------------------------------------------|----------------|
/// | black-holed for `blackHoleLinger`                     | `closeSilently`|
/// | no traffic either way for `natTimeout` (if set)       | `blackHole`    |
/// | nothing received for 3 × heartbeat (`wire.md` §7)     | `close`        |
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

    func verdict(now: NIODeadline, lastReceived: NIODeadline, lastSent: NIODeadline,
                 heartbeat: TimeAmount, blackHoledSince: NIODeadline?) -> Verdict {
        if let blackHoledSince {
            return now - blackHoledSince >= blackHoleLinger ? .closeSilently : .keep
        }
        if let natTimeout, now - max(lastReceived, lastSent) >= natTimeout {
            return .blackHole
        }
        if now - lastReceived >= heartbeat * 3 {
            return .close
        }
        return .keep
    }
}
