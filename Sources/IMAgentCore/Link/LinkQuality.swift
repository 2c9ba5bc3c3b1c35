/// How good the path to the server is, from the smoothed RTT and the share of
/// recent PINGs that went unanswered. The worse of the two decides.
///
/// | level     | SRTT below | PINGs lost (last 10) | heartbeat scale |
/// |-----------|-----------:|---------------------:|----------------:|
/// | excellent | 150 ms     | none                 | 1               |
/// | good      | 350 ms     | ≤ 10 %               | 3/4             |
/// | fair      | 1 s        | ≤ 30 %               | 1/2             |
/// | poor      | otherwise  | otherwise            | 1/4             |
///
/// A slow or lossy path is where middleboxes drop idle flows and where a
/// dead link is most likely, so it gets a shorter heartbeat: a dead link is
/// noticed sooner, and the NAT mapping is refreshed more often. Without any
/// RTT sample yet the RTT side counts as excellent (no evidence either way).
enum LinkQuality: Int, Comparable, Hashable, Sendable, CaseIterable {
    case excellent, good, fair, poor

    static func < (lhs: LinkQuality, rhs: LinkQuality) -> Bool { lhs.rawValue < rhs.rawValue }

    init(smoothedRTT: Duration?, lossRatio: Double) {
        let byRTT: LinkQuality =
            switch smoothedRTT {
            case nil: .excellent
            case let rtt? where rtt < .milliseconds(150): .excellent
            case let rtt? where rtt < .milliseconds(350): .good
            case let rtt? where rtt < .seconds(1): .fair
            case .some: .poor
            }
        let byLoss: LinkQuality =
            switch lossRatio {
            case ...0: .excellent
            case ...0.1: .good
            case ...0.3: .fair
            default: .poor
            }
        self = max(byRTT, byLoss)
    }

    /// The factor the heartbeat interval is multiplied by at this level.
    var intervalScale: Double {
        switch self {
        case .excellent: 1
        case .good: 0.75
        case .fair: 0.5
        case .poor: 0.25
        }
    }
}

/// The outcomes of the last `capacity` PINGs, answered or lost.
struct PingLossWindow: Hashable, Sendable {
    static let capacity = 10

    private var outcomes: [Bool] = []  // true = lost; oldest first

    mutating func record(lost: Bool) {
        if outcomes.count == Self.capacity {
            outcomes.removeFirst()
        }
        outcomes.append(lost)
    }

    /// Lost PINGs over recorded PINGs; zero before any PING.
    var lossRatio: Double {
        guard !outcomes.isEmpty else { return 0 }
        return Double(outcomes.count(where: { $0 })) / Double(outcomes.count)
    }
}
