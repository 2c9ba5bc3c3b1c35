import AgentIPC

/// What one session sent and received, and what was wrong with it.
struct SessionTrack {
    let index: Int
    /// The daemon's id; 0 until the first OPENED.
    var id: UInt64 = 0

    // Outbound. Message number n is sent as the session's n-th SEND, so its seq is n.
    /// The highest seq the daemon said it stored (ACCEPTED, or SENT_SEQ on attach).
    var accepted: UInt64 = 0
    /// The highest message number ever handed to a SEND.
    var issued: UInt64 = 0
    /// When each message number was last sent, in nanoseconds since the start (index n - 1).
    var sentAt: [UInt64]

    // Inbound.
    /// The last inbound SEQ processed: redeliveries at or below it are skipped.
    var lastSeq: UInt64 = 0
    /// The last message number processed.
    var lastNumber: UInt64 = 0
    /// The highest inbound SEQ acknowledged with ACK.
    var ackedSeq: UInt64 = 0
    /// Message numbers seen (index n).
    var seen: [Bool]
    var received = 0
    /// Attached on the current connection: OPENED was taken in.
    var attached = false
    /// MESSAGEs read before that, checked once it is.
    var early: [IPCMessage.InboundMessage] = []

    init(index: Int, messages: Int) {
        self.index = index
        sentAt = Array(repeating: 0, count: messages)
        seen = Array(repeating: false, count: messages + 1)
    }
}

/// Counters of the whole process, reported at the end.
struct LoadCounters {
    var sends = 0
    var resent = 0
    var queueFull = 0
    /// ACCEPTED with a seq other than the message's number: the daemon reordered SENDs.
    var acceptMismatch = 0
    /// On attach SENT_SEQ was below a seq already ACCEPTED: the daemon lost stored messages.
    var acceptedLost = 0
    var duplicated = 0
    var outOfOrder = 0
    /// Inbound SEQ not one above the last processed.
    var seqGaps = 0
    var corrupt = 0
    var redelivered = 0
    var expired = 0
    var sessionFailures = 0
    var reconnects = 0
    /// Connections closed on purpose by `--reattach-every`.
    var reattached = 0
    var latenciesNS: [UInt64] = []
    /// When each message in `latenciesNS` was sent, in nanoseconds since the start.
    var latencySentAtNS: [UInt64] = []
    /// The longest pause between two messages received by this process (not counting its own stall).
    var maxGapNS: UInt64 = 0
    var lastReceiveNS: UInt64?
}

/// Everything the sending tasks and the receiving task share, under one lock.
struct LoadState {
    var tracks: [SessionTrack]
    var indexByID: [UInt64: Int] = [:]
    var counters = LoadCounters()
    /// Set while the program plays the stuck client: senders wait, nobody reads.
    var stalling = false
    var stalled = false
    /// Set by `--reattach-every` just before it closes the connection on purpose.
    var reattaching = false

    init(sessions: Int, messages: Int) {
        tracks = (0..<sessions).map { SessionTrack(index: $0, messages: messages) }
    }

    var totalReceived: Int { tracks.reduce(0) { $0 + $1.received } }
}
