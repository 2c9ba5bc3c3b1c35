/// Who made the daemon write a line it would not write on its own: a local user, by uid, or the
/// broker (and whoever can publish to this host's topics).
enum LogSource: Hashable, Sendable, CustomStringConvertible {
    case uid(UInt32)
    case broker
    /// Every source beyond the limiter's table, folded into one.
    case others

    var description: String {
        switch self {
        case .uid(let uid): "uid \(uid)"
        case .broker: "the broker"
        case .others: "other sources"
        }
    }
}

/// The lines that input from outside the daemon can make it write, one kind per log site.
enum OutsideLogKind: String, Hashable, Sendable, CaseIterable {
    case noHello = "closing a client that sent no HELLO"
    case protocolViolation = "closing a client that broke the protocol"
    case publishForNoSession = "mqtt: dropping a PUBLISH that no open session takes"
    case publishOutOfTurn = "mqtt: dropping a QoS 0 PUBLISH out of turn"
    case oversizedPublish = "mqtt: refusing a PUBLISH above the Maximum Packet Size the daemon announced"
    case inboxFull = "mqtt: refusing a PUBLISH (PUBACK 0x97 Quota exceeded: the broker drops it) for a session whose inbox is full"
    case receiveMaximumExceeded = "mqtt: the broker sends more unacknowledged QoS 1 messages than the daemon's Receive Maximum allows; taking them, and reading no more while too many wait"
}

/// The rate limit on lines that outside input triggers, as a value: the caller passes the time
/// in, the limiter says whether to write the line and hands back summaries of what it held back
/// ("… and 3,898 more like it from uid 65534 in the last 10 s").
///
/// Lines are counted per source and kind in fixed windows: the first `perKey` of a window are
/// written, and so are no more than `global` of all sources together, so neither one user nor
/// many can spend the journal's rate limit (10,000 lines in 30 s by default) that the daemon's
/// own link and store messages need. At most `maxKeys` sources and kinds are tracked; lines from
/// any beyond them are counted under one key of their own. So each window writes at most
/// `global` lines and `maxKeys` summaries, and the table never grows past `maxKeys`.
struct OutsideLogLimiter {
    struct Key: Hashable, Sendable {
        var source: LogSource
        /// Nil for the key that every source and kind beyond the table fold into.
        var kind: OutsideLogKind?

        static let overflow = Key(source: .others, kind: nil)
    }

    struct Limits: Sendable {
        var window: Duration = .seconds(10)
        var perKey = 5
        var global = 50
        var maxKeys = 64
    }

    /// The lines of one key that a window held back.
    struct Summary: Hashable, Sendable {
        var key: Key
        var suppressed: Int
        var window: Duration
        /// How long ago the window ended: zero when summarised on time.
        var ago: Duration

        var text: String {
            let what = key.kind.map { "\($0.rawValue): … and \(Self.grouped(suppressed)) more like it from \(key.source)" }
                ?? "… and \(Self.grouped(suppressed)) more lines from other sources"
            let seconds = Self.wholeSeconds(window)
            let agoSeconds = Self.wholeSeconds(ago)
            return agoSeconds == 0 ? "\(what) in the last \(seconds) s" : "\(what) in \(seconds) s, until \(agoSeconds) s ago"
        }

        /// 3898 as "3,898".
        static func grouped(_ number: Int) -> String {
            var digits = String(number.magnitude)
            var index = digits.endIndex
            while digits.distance(from: digits.startIndex, to: index) > 3 {
                index = digits.index(index, offsetBy: -3)
                digits.insert(",", at: index)
            }
            return number < 0 ? "-" + digits : digits
        }

        private static func wholeSeconds(_ duration: Duration) -> Int64 {
            duration.components.seconds
        }
    }

    private struct Tally {
        var start: MonotonicInstant
        var written = 0
        var suppressed = 0
    }

    let limits: Limits
    private var tallies: [Key: Tally] = [:]
    private var globalStart: MonotonicInstant?
    private var globalWritten = 0

    init(limits: Limits = Limits()) {
        precondition(limits.maxKeys >= 2 && limits.perKey >= 1 && limits.global >= 1)
        self.limits = limits
    }

    /// Keys tracked now: at most `limits.maxKeys`.
    var trackedKeys: Int { tallies.count }

    /// Whether to write a line of `kind` from `source` at `now`, and the summaries of windows that
    /// have ended (to be written first).
    mutating func admit(_ kind: OutsideLogKind, from source: LogSource, now: MonotonicInstant) -> (write: Bool, summaries: [Summary]) {
        let summaries = due(now: now)
        var key = Key(source: source, kind: kind)
        if tallies[key] == nil, tallies.count >= limits.maxKeys - 1 { key = .overflow }
        var tally = tallies[key] ?? Tally(start: now)
        if let start = globalStart, now - start < limits.window {
            // The global window goes on.
        } else {
            globalStart = now
            globalWritten = 0
        }
        let write = tally.written < limits.perKey && globalWritten < limits.global
        if write {
            tally.written += 1
            globalWritten += 1
        } else {
            tally.suppressed += 1
        }
        tallies[key] = tally
        return (write, summaries)
    }

    /// Ends every window that is over at `now`: the summaries of those that held lines back.
    mutating func due(now: MonotonicInstant) -> [Summary] {
        var summaries: [Summary] = []
        for (key, tally) in tallies where now - tally.start >= limits.window {
            tallies[key] = nil
            if tally.suppressed > 0 {
                summaries.append(Summary(key: key, suppressed: tally.suppressed, window: limits.window,
                                         ago: now - (tally.start + limits.window)))
            }
        }
        // In the order the windows started: the log reads in time order.
        return summaries.sorted { ($0.ago, $0.key.source.description) > ($1.ago, $1.key.source.description) }
    }

    /// When the earliest window that held lines back ends: when to call `due(now:)` next.
    var nextSummary: MonotonicInstant? {
        tallies.values.filter { $0.suppressed > 0 }.map { $0.start + limits.window }.min()
    }
}
