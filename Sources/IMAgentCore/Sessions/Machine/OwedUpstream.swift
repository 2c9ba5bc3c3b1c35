/// What the server is owed beside each session's queue: the CLOSE of each session closed
/// while no link was up, for the next link; and an ACK from each session that stored inbound
/// DATA since the last flush, sent together by one flush at the end of the turn.
struct OwedUpstream {
    private var closes: Set<UInt64> = []
    private var acks: Set<UInt64> = []
    /// Whether the flush of `acks` is scheduled (`SessionAction.scheduleAckFlush`): while any
    /// session owes an ACK, exactly one is.
    private var ackFlushScheduled = false

    /// Session `id` was closed with no link up: CLOSE goes up on the next link.
    mutating func close(_ id: UInt64) {
        closes.insert(id)
    }

    /// The sessions owed a CLOSE, in id order; none is owed any more.
    mutating func takeCloses() -> [UInt64] {
        defer { closes.removeAll() }
        return closes.sorted()
    }

    /// Session `id` stored inbound DATA and owes an ACK. Returns whether the flush must be
    /// scheduled now (the first ACK owed since the last flush).
    mutating func ack(_ id: UInt64) -> Bool {
        acks.insert(id)
        defer { ackFlushScheduled = true }
        return !ackFlushScheduled
    }

    /// The flush runs: the sessions that owe an ACK; none owes one any more.
    mutating func takeAcks() -> Set<UInt64> {
        ackFlushScheduled = false
        defer { acks.removeAll(keepingCapacity: true) }
        return acks
    }
}
