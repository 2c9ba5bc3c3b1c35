/// Finds the longest idle gap the path's NATs and firewalls tolerate, the way
/// Mars's smart heartbeat does: start at a gap known to be safe, step up after
/// a run of answered PINGs, and on a death beyond what was proven fall back to
/// the longest gap that survived and pin it.
///
/// With the defaults (`min` 15 s, `max` 300 s, step 30 s, 3 successes) and
/// a NAT that drops flows idle for T = 200 s:
///
/// | candidate | PINGs sent after an idle gap of | outcome                        |
/// |-----------|---------------------------------|--------------------------------|
/// | 15 s      | 13.5–16.5 s (±10 % jitter)      | 3 answered → step up           |
/// | 45 s … 165 s | likewise                     | 3 answered each → step up      |
/// | 195 s     | 175.5–214.5 s                   | a gap ≥ 200 s kills the link   |
/// | pinned    | survived / 1.1 × (0.9…1.1)      | never above a gap that survived |
///
/// A success only counts toward a step when the PING really tested the
/// candidate (its idle gap was at least the candidate's lowest jittered
/// value); shorter gaps, as when traffic or a short active-mode interval keeps
/// the link busy, prove nothing about the NAT. A death counts against the
/// NAT only when the link had been idle longer than any gap that survived:
/// losing a link at a gap that worked before is some other failure.
///
/// A pin lasts until the network changes or `pinDuration` (6 h) passes: a NAT
/// does not change its timeout, but a death that only looked like a NAT
/// timeout must not hold a daemon that runs for months at a short interval.
struct NATProber: Hashable, Sendable {
    struct Configuration: Hashable, Sendable {
        var bounds: ClosedRange<Duration>
        var step: Duration
        var successesPerStep: Int
        var pinDuration: Duration

        init(
            bounds: ClosedRange<Duration> = .seconds(15)...(.seconds(300)),
            step: Duration = .seconds(30),
            successesPerStep: Int = 3,
            pinDuration: Duration = .seconds(6 * 3600)
        ) {
            precondition(bounds.lowerBound > .zero, "the shortest heartbeat interval must be positive")
            precondition(step > .zero, "the NAT probing step must be positive")
            precondition(successesPerStep > 0, "stepping up needs at least one success")
            self.bounds = bounds
            self.step = step
            self.successesPerStep = successesPerStep
            self.pinDuration = pinDuration
        }
    }

    /// ± share of the heartbeat interval drawn at random for each idle cycle.
    /// It lives here because the pinned interval must stay below a gap that
    /// survived even when jittered upward.
    static let intervalJitter = 0.1

    let configuration: Configuration
    /// The gap being tried.
    private(set) var candidate: Duration
    /// The longest idle gap after which a PING was answered.
    private(set) var longestSurvivedGap: Duration = .zero
    private var successesAtCandidate = 0
    /// While set, the interval stays at the pinned value.
    private var pinnedUntil: MonotonicInstant?

    init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        self.candidate = configuration.bounds.lowerBound
    }

    var isPinned: Bool { pinnedUntil != nil }

    /// The idle interval the NAT allows, before jitter: the candidate while
    /// probing; when pinned, the longest survived gap shrunk by the jitter so
    /// that no jittered interval exceeds it.
    var interval: Duration {
        guard isPinned else { return candidate }
        return (longestSurvivedGap / (1 + Self.intervalJitter)).clamped(to: configuration.bounds)
    }

    /// A PING sent after `gap` of silence was answered.
    mutating func pingAnswered(afterIdleGap gap: Duration, now: MonotonicInstant) {
        longestSurvivedGap = max(longestSurvivedGap, gap)
        if let pinnedUntil {
            guard now >= pinnedUntil else { return }
            self.pinnedUntil = nil
            candidate = interval
            successesAtCandidate = 0
        }
        guard gap >= candidate * (1 - Self.intervalJitter) else { return }
        successesAtCandidate += 1
        guard successesAtCandidate >= configuration.successesPerStep,
            candidate < configuration.bounds.upperBound
        else { return }
        candidate = min(configuration.bounds.upperBound, candidate + configuration.step)
        successesAtCandidate = 0
    }

    /// The link died, last silent for `gap` before the PING that went
    /// unanswered (or before it was lost).
    mutating func linkDied(afterIdleGap gap: Duration, now: MonotonicInstant) {
        successesAtCandidate = 0
        guard gap > longestSurvivedGap else { return }
        pinnedUntil = now + configuration.pinDuration
    }

    /// A new network means new middleboxes: nothing learnt still holds.
    mutating func networkChanged() {
        self = NATProber(configuration: configuration)
    }
}
