/// Which session's message brings the link down, again and again (imagentd(8), QUARANTINE).
///
/// A server or broker that drops the connection whenever one message arrives (a message it
/// cannot take, whatever the reason) would otherwise cost every session the link forever: the
/// message goes again on each new link, and the link falls again. Each session counts the
/// losses of the link that its oldest unacknowledged message was in flight for, written shortly
/// before; the server's acknowledgement of that message clears the count. At
/// `quarantineAfter` losses the session is quarantined (failed; nothing more of it goes
/// upstream), and the link and the other sessions go on.
///
/// A network that drops the link while many sessions transmit does not quarantine them: a
/// message that is merely unlucky gets through, and is acknowledged, on the first link that
/// lasts a round trip (OPEN_OK's LAST_ACKED counts too).
struct PoisonWatch: Hashable, Sendable {
    /// Losses of the link, each with the same message in flight and no acknowledgement of it in
    /// between, that quarantine its session.
    static let quarantineAfter = 3
    /// A loss counts only this soon after the message was written: a message that brings the
    /// link down does so as it arrives, while a path that dies is found later, by the heartbeat.
    static let window: Duration = .seconds(10)

    /// A session whose count was reached at a loss, with the place its message had on the link.
    struct Suspect: Hashable, Sendable {
        var session: UInt64
        var seq: UInt64
        /// The message's place among every DATA written on links (`SessionTotals.dataWritten`).
        var writeOrder: UInt64
    }

    /// The message watched (its IPC seq): the session's oldest unacknowledged one at the last loss.
    private(set) var seq: UInt64 = 0
    /// Losses it was in flight for, with no acknowledgement of it since.
    private(set) var losses = 0

    /// The link was lost at `lostAt`, and the session's oldest unacknowledged message, `seq`, was
    /// written on it at `writtenAt`. Returns whether the session has now reached the count.
    mutating func linkLost(oldestUnacked seq: UInt64, writtenAt: MonotonicInstant, lostAt: MonotonicInstant) -> Bool {
        // Long after the message went, the loss says nothing about it, either way.
        guard lostAt - writtenAt <= Self.window else { return false }
        if seq != self.seq {
            self.seq = seq
            losses = 0
        }
        losses += 1
        return losses >= Self.quarantineAfter
    }

    /// The server holds every message up to `seq`: the one watched got through.
    mutating func acknowledged(through seq: UInt64) {
        if seq >= self.seq { self = PoisonWatch() }
    }

    /// Of the sessions that reached the count at one loss, the one to quarantine: the one whose
    /// message was written first. A server reads a link in order, so what was written after the
    /// message that brings it down may never have been read; those sessions are left to later
    /// losses, which they count only if their message still does not get through.
    static func culprit(_ reached: [Suspect]) -> Suspect? {
        reached.min { $0.writeOrder < $1.writeOrder }
    }
}
