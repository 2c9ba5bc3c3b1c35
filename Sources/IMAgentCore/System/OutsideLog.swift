import Logging
import NIOCore
import Synchronization

extension OutsideLogKind {
    /// A client's mistake is a notice; what the broker sends that has to be dropped, a warning.
    var level: Logger.Level {
        switch self {
        case .noHello, .protocolViolation: .notice
        case .publishForNoSession, .publishOutOfTurn, .oversizedPublish, .inboxFull, .receiveMaximumExceeded: .warning
        }
    }
}

/// Where every line that input from outside the daemon triggers goes through: one limiter for
/// the whole process (the journal's rate limit is the whole service's), fed with the monotonic
/// clock. A window that held lines back is summarised when it ends, by a timer on the loop of the
/// line that started the wait, or by the next such line, whichever comes first.
final class OutsideLog: Sendable {
    static let shared = OutsideLog()

    private struct State {
        var limiter: OutsideLogLimiter
        var summaryScheduled = false
    }

    private let state: Mutex<State>

    init(limits: OutsideLogLimiter.Limits = .init()) {
        state = Mutex(State(limiter: OutsideLogLimiter(limits: limits)))
    }

    /// Writes `kind`'s line with `metadata` to `logger`, unless `source` has had its
    /// share of this window's lines.
    func log(_ kind: OutsideLogKind, from source: LogSource, metadata: Logger.Metadata = [:],
             to logger: Logger, eventLoop: any EventLoop,
             file: String = #fileID, function: String = #function, line: UInt = #line) {
        guard logger.logLevel <= kind.level else { return }
        let now = MonotonicInstant.now
        let (write, summaries, summaryAt) = state.withLock { state in
            let (write, summaries) = state.limiter.admit(kind, from: source, now: now)
            var summaryAt: MonotonicInstant?
            if !state.summaryScheduled, let next = state.limiter.nextSummary {
                state.summaryScheduled = true
                summaryAt = next
            }
            return (write, summaries, summaryAt)
        }
        Self.write(summaries, to: logger)
        if write {
            logger.log(level: kind.level, "\(kind.rawValue)", metadata: metadata, file: file, function: function, line: line)
        }
        if let summaryAt { scheduleSummaries(at: summaryAt, now: now, logger: logger, eventLoop: eventLoop) }
    }

    private func scheduleSummaries(at instant: MonotonicInstant, now: MonotonicInstant, logger: Logger, eventLoop: any EventLoop) {
        eventLoop.scheduleTask(in: .nanoseconds(max(0, (instant - now).wholeNanoseconds))) { [self] in
            let now = MonotonicInstant.now
            let (summaries, next) = state.withLock { state in
                let summaries = state.limiter.due(now: now)
                let next = state.limiter.nextSummary
                state.summaryScheduled = next != nil
                return (summaries, next)
            }
            Self.write(summaries, to: logger)
            if let next { scheduleSummaries(at: next, now: now, logger: logger, eventLoop: eventLoop) }
        }
    }

    private static func write(_ summaries: [OutsideLogLimiter.Summary], to logger: Logger) {
        for summary in summaries {
            logger.log(level: summary.key.kind?.level ?? .notice, "\(summary.text)",
                       metadata: ["source": "\(summary.key.source)", "suppressed": "\(summary.suppressed)"])
        }
    }
}

/// Text from outside (a topic, a service or client name, a peer's error) as it goes into a log
/// line: at most `maxBytes` of it, cut between characters, so one line stays small whatever it
/// quotes.
enum LogText {
    static let maxBytes = 200

    static func bounded(_ text: String, maxBytes: Int = LogText.maxBytes) -> String {
        let size = text.utf8.count
        guard size > maxBytes else { return text }
        var end = text.startIndex
        var keptBytes = 0
        while end < text.endIndex {
            let next = text.index(after: end)
            let bytes = text.utf8.distance(from: end, to: next)
            guard keptBytes + bytes <= maxBytes else { break }
            keptBytes += bytes
            end = next
        }
        return "\(text[..<end])… (\(size - keptBytes) more bytes)"
    }
}
