/// How the link came back after one fault ended.
struct Recovery: Sendable {
    enum Outcome: Sendable {
        /// The link was never dropped: connected since before the fault began.
        case stayedUp
        /// The link dropped and was back before the fault ended (loss it worked through).
        case backDuringFault
        /// Connected again this long after the fault ended (`connected_since_ms` − end).
        case reconnected(ms: Int64)
        /// Not connected within the wait.
        case notBack(afterSeconds: Double)
    }

    var fault: String
    var outcome: Outcome
    /// Reconnections the daemon counted while the fault lasted (when it was not itself restarted).
    var reconnectsDuring: Int?

    var milliseconds: Int64? {
        if case .reconnected(let ms) = outcome { ms } else { nil }
    }

    var text: String {
        switch outcome {
        case .stayedUp: "link stayed up"
        case .backDuringFault: "dropped and back before the fault ended"
        case .reconnected(let ms): "connected \(ms) ms after"
        case .notBack(let seconds): "NOT connected \(Int(seconds)) s after"
        }
    }

    /// How long after a fault a surviving link is watched for a replacement.
    static let replacedWithinSeconds = 2.5

    /// Waits until the monitor shows the link connected after `endMS` and classifies it.
    static func measure(_ fault: String, monitor: LinkMonitor, startMS: Int64, endMS: Int64,
                        reconnectsBefore: Int?, waitSeconds: Double = 60) async -> Recovery {
        guard var sample = await monitor.waitConnected(after: endMS, seconds: waitSeconds),
              var since = sample.connectedSinceMS else {
            return Recovery(fault: fault, outcome: .notBack(afterSeconds: waitSeconds), reconnectsDuring: nil)
        }
        // A link that survived the fault may still be replaced a moment after
        // it (the probe beside a suspected link, imagentd(8)): that counts as
        // a reconnect, so wait as long as the 2 s bound for one.
        if since < startMS, let newer = await monitor.waitNewLink(after: endMS, since: startMS, seconds: replacedWithinSeconds),
           let newerSince = newer.connectedSinceMS {
            sample = newer
            since = newerSince
        }
        let during = reconnectsBefore.map { max(0, sample.reconnects - $0) }
        let outcome: Outcome = since < startMS ? .stayedUp : since <= endMS ? .backDuringFault : .reconnected(ms: since - endMS)
        return Recovery(fault: fault, outcome: outcome, reconnectsDuring: during)
    }
}
