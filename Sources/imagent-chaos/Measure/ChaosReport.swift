import Foundation

/// The end of a run: the loadgens' counts summed, latencies, reconnect
/// times per fault, a readable report and one JSON line; passed only when
/// nothing was lost, duplicated or reordered and every loadgen passed.
struct ChaosReport {
    var plan: ChaosPlan
    var phases: [PhaseRecord]
    var reports: [LoadFleet.Finished]
    var latencies: Latencies
    var firstConnectLoopbackMS: Int64?
    var firstConnectVethMS: Int64?
    var elapsedSeconds: Double
    var drained: Bool
    var problems: [String]
    var notes: [String] = []

    func total(_ key: String) -> Int { reports.reduce(0) { $0 + $1.int(key) } }

    var lost: Int { total("lost") }
    var duplicated: Int { total("duplicated") }
    var outOfOrder: Int { total("out_of_order") }
    var failedLoadgens: [LoadFleet.Finished] { reports.filter { !$0.passed } }

    var passed: Bool {
        !reports.isEmpty && drained && problems.isEmpty && lost == 0 && duplicated == 0 && outOfOrder == 0
            && failedLoadgens.isEmpty
    }

    var recoveries: [Recovery] { phases.flatMap(\.recoveries) }

    /// Reconnect times after the network came back (loss, partition, flaps, thin pipe), in ms.
    var networkRestoreMS: [Int64] {
        phases.filter { !$0.name.contains("kill") && !$0.name.hasPrefix("delay") }
            .flatMap(\.recoveries).compactMap(\.milliseconds)
    }

    // MARK: Text

    var text: String {
        var lines: [String] = []
        let overall = latencies.summary()
        lines.append("")
        lines.append("== imagent chaos suite: \(plan.mode.rawValue) mode, seed \(plan.seed), \(String(format: "%.0f", elapsedSeconds)) s")
        lines.append("")
        lines.append(pad("phase", 44) + pad("echoes", 11) + pad("p50 ms", 10) + "p99 ms")
        for phase in phases {
            let summary = latencies.summary(sentFromMS: phase.startMS, toMS: phase.endMS)
            let seconds = Double(phase.endMS - phase.startMS) / 1000
            lines.append(pad("\(phase.name) (\(String(format: "%.0f", seconds)) s)", 44) + pad("\(summary.count)", 11)
                + pad(ms(summary.p50MS), 10) + ms(summary.p99MS))
            for note in phase.notes { lines.append("    " + note) }
            for recovery in phase.recoveries {
                let during = recovery.reconnectsDuring.map { $0 > 0 ? ", \($0) reconnects during it" : "" } ?? ""
                lines.append("    " + recovery.fault + ": " + recovery.text + during)
            }
        }
        lines.append("")
        lines.append("messages each way: \(total("expected")) expected, \(total("sent")) sends (\(total("resent")) resent), "
            + "\(total("accepted")) accepted, \(total("received")) received")
        lines.append("lost \(lost), duplicated \(duplicated), out of order \(outOfOrder), seq gaps \(total("seq_gaps")), "
            + "corrupt \(total("corrupt")), accepted-then-lost \(total("accepted_lost")), "
            + "redelivered and skipped \(total("redelivered_skipped"))")
        lines.append("loadgens: \(reports.count) (\(failedLoadgens.count) failed), kill -9 + restart \(reports.reduce(0) { $0 + $1.restarts }), "
            + "reattached in-process \(total("reattached")), reconnected after a daemon death \(total("reconnects"))")
        lines.append("latency send → echo: p50 \(ms(overall.p50MS)) ms, p99 \(ms(overall.p99MS)) ms, max \(ms(overall.maxMS)) ms "
            + "(\(overall.count) timed echoes)")
        lines.append("first connect: loopback \(firstConnectLoopbackMS.map { "\($0) ms" } ?? "-"), "
            + "over the veth \(firstConnectVethMS.map { "\($0) ms" } ?? "-") (daemon process start → LOGIN_OK)")
        let restore = networkRestoreMS
        lines.append("reconnect after the network came back: \(restore.isEmpty ? "-" : restore.map(String.init).joined(separator: ", ")) ms"
            + (restore.isEmpty ? "" : " (max \(restore.max()!) ms)"))
        for note in notes { lines.append("NOTE: \(note)") }
        for problem in problems { lines.append("PROBLEM: \(problem)") }
        lines.append(passed ? "PASSED: every message arrived exactly once, in order" : "FAILED")
        return lines.joined(separator: "\n")
    }

    // MARK: JSON

    var json: String {
        let overall = latencies.summary()
        var fields: [(String, String)] = [
            ("mode", quote(plan.mode.rawValue)),
            ("seed", "\(plan.seed)"),
            ("elapsed_s", String(format: "%.1f", elapsedSeconds)),
            ("loadgens", "\(reports.count)"),
            ("loadgens_failed", "\(failedLoadgens.count)"),
            ("loadgen_kills", "\(reports.reduce(0) { $0 + $1.restarts })"),
            ("reattached", "\(total("reattached"))"),
        ]
        for key in ["expected", "sent", "resent", "accepted", "received", "lost", "duplicated", "out_of_order", "seq_gaps",
                    "corrupt", "accepted_lost", "redelivered_skipped"] {
            fields.append((key, "\(total(key))"))
        }
        fields += [
            ("p50_ms", ms(overall.p50MS)), ("p99_ms", ms(overall.p99MS)), ("max_ms", ms(overall.maxMS)),
            ("first_connect_loopback_ms", firstConnectLoopbackMS.map(String.init) ?? "null"),
            ("first_connect_veth_ms", firstConnectVethMS.map(String.init) ?? "null"),
            ("reconnect_after_network_restore_max_ms", networkRestoreMS.max().map(String.init) ?? "null"),
        ]
        let faults = recoveries.map { recovery -> String in
            let value: String
            switch recovery.outcome {
            case .reconnected(let ms): value = "\(ms)"
            case .stayedUp: value = quote("stayed up")
            case .backDuringFault: value = quote("back during the fault")
            case .notBack: value = quote("not back")
            }
            return "{\"fault\":\(quote(recovery.fault)),\"reconnect_ms\":\(value)}"
        }
        fields.append(("reconnects", "[" + faults.joined(separator: ",") + "]"))
        fields.append(("problems", "[" + problems.map(quote).joined(separator: ",") + "]"))
        fields.append(("notes", "[" + notes.map(quote).joined(separator: ",") + "]"))
        fields.append(("passed", passed ? "true" : "false"))
        return "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
    }

    private func quote(_ text: String) -> String {
        "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }

    private func ms(_ value: Double) -> String { String(format: "%.1f", value) }

    private func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
    }
}
