/// When outbound messages' TTLs are looked at: which sessions hold messages with a TTL, and
/// the deadline the one TTL timer is set for. The messages themselves, and which of them the
/// server may hold (those are never given up), stay with their queue (`OutboundQueue`'s TTL
/// methods); this is only the schedule, and every change goes through a method here, which keeps:
///
/// - `timer` is the earliest deadline asked for since the timer last fired (nil: none was),
///   so the one timer set for it misses no deadline;
/// - a session stays in `sessions` from the first message with a TTL it stores until a look at
///   it finds no TTL left, or it is closed.
///
/// Deadlines are ms since the Unix epoch, passed in; the schedule holds no clock.
struct ExpirySchedule: Hashable, Sendable {
    /// Sessions with outbound messages that have a TTL (in the window or in the store only).
    private(set) var sessions: Set<UInt64> = []
    /// When the timer fires; nil when it is not set.
    private(set) var timer: Int64?

    init() {}

    /// Whether the timer looks at `session`.
    func tracks(_ session: UInt64) -> Bool { sessions.contains(session) }

    /// `session` holds messages with a TTL.
    mutating func track(_ session: UInt64) {
        sessions.insert(session)
    }

    /// Something may be due at `deadline`. Returns the deadline to set the timer for when it
    /// must fire earlier than it is set to; nil when the timer set already comes first.
    mutating func wake(at deadline: Int64) -> Int64? {
        if let timer, timer <= deadline { return nil }
        timer = deadline
        return deadline
    }

    /// The timer fired: returns the sessions to look at, in id order. The timer is not set
    /// until a look asks for it again (`wake`).
    mutating func fire() -> [UInt64] {
        timer = nil
        return sessions.sorted()
    }

    /// `session` holds no message with a TTL any more, or is closed.
    mutating func forget(_ session: UInt64) {
        sessions.remove(session)
    }
}
