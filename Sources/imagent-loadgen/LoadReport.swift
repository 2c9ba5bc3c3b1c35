/// The one JSON line printed at the end, and whether the run passed.
struct LoadReport {
    var json: String
    var passed: Bool

    init(options: LoadOptions, state: LoadState, elapsed: Duration) {
        let counters = state.counters
        let expected = options.sessions * options.messages
        let received = state.totalReceived
        let accepted = state.tracks.reduce(0) { $0 + Int($1.accepted) }
        let lost = expected - received
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let latencies = counters.latenciesNS.sorted()
        func percentile(_ p: Int) -> Double {
            guard !latencies.isEmpty else { return 0 }
            return Double(latencies[min(latencies.count - 1, latencies.count * p / 100)]) / 1e6
        }
        let errors = counters.duplicated + counters.outOfOrder + counters.seqGaps + counters.corrupt
            + counters.acceptMismatch + counters.acceptedLost + counters.expired + counters.sessionFailures
        passed = lost == 0 && errors == 0

        let fields: [(String, String)] = [
            ("tag", "\(options.tag)"),
            ("sessions", "\(options.sessions)"),
            ("messages_per_session", "\(options.messages)"),
            ("size", "\(options.size)"),
            ("window", "\(options.window)"),
            ("expected", "\(expected)"),
            ("sent", "\(counters.sends)"),
            ("resent", "\(counters.resent)"),
            ("accepted", "\(accepted)"),
            ("received", "\(received)"),
            ("lost", "\(lost)"),
            ("duplicated", "\(counters.duplicated)"),
            ("out_of_order", "\(counters.outOfOrder)"),
            ("seq_gaps", "\(counters.seqGaps)"),
            ("corrupt", "\(counters.corrupt)"),
            ("redelivered_skipped", "\(counters.redelivered)"),
            ("accept_mismatch", "\(counters.acceptMismatch)"),
            ("accepted_lost", "\(counters.acceptedLost)"),
            ("queue_full", "\(counters.queueFull)"),
            ("expired", "\(counters.expired)"),
            ("session_failures", "\(counters.sessionFailures)"),
            ("reconnects", "\(counters.reconnects)"),
            ("reattached", "\(counters.reattached)"),
            ("stalled", state.stalled ? "true" : "false"),
            ("elapsed_s", format(seconds)),
            ("received_per_s", format(seconds > 0 ? Double(received) / seconds : 0)),
            ("p50_ms", format(percentile(50))),
            ("p99_ms", format(percentile(99))),
            ("max_ms", format(latencies.last.map { Double($0) / 1e6 } ?? 0)),
            ("max_gap_ms", format(Double(counters.maxGapNS) / 1e6)),
            ("passed", passed ? "true" : "false"),
        ]
        json = "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
    }
}

/// Three decimals, no exponent: JSON numbers any parser takes.
private func format(_ value: Double) -> String {
    let thousandths = Int64((value * 1000).rounded())
    let sign = thousandths < 0 ? "-" : ""
    let magnitude = thousandths.magnitude
    let fraction = String(magnitude % 1000)
    return "\(sign)\(magnitude / 1000).\(String(repeating: "0", count: 3 - fraction.count))\(fraction)"
}
