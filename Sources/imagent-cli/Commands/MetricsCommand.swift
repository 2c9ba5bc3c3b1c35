import AgentIPC
import ArgumentParser

/// `imagent metrics`: the daemon's counters and gauges.
struct MetricsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "metrics",
        abstract: "Show imagentd's counters and gauges.",
        discussion: """
            --prometheus prints them in the Prometheus text exposition format (version 0.0.4) exactly as \
            imagentd's [metrics] prometheus_listen endpoint serves them (imagentd_<name>, with HELP and TYPE), \
            e.g. for a textfile collector. With --json, prints imagentd's METRICS document as one line of JSON.
            """)

    @OptionGroup var options: GlobalOptions

    @Flag(name: .long, help: "Print the Prometheus text exposition format.")
    var prometheus = false

    func validate() throws {
        if prometheus && options.json {
            throw ValidationError("--prometheus and --json are two output formats; choose one")
        }
    }

    func run() async throws {
        let text = try await options.withClient(for: "metrics") { try await $0.metrics() }
        let metrics = try DaemonDocument.parse(text, from: .metrics)
        if options.json {
            Output.line(metrics.compactText)
        } else if prometheus {
            // The daemon's own exposition (HELP, TYPE, histograms), as its endpoint serves it.
            if case .string(let exposition)? = metrics["prometheus"] {
                Output.lines(exposition.split(separator: "\n").map(String.init))
            } else {
                Output.lines(PrometheusExposition.render(metrics))
            }
        } else {
            Output.lines(Self.render(metrics))
        }
    }

    /// Each section ("counters", "gauges", and whatever else the daemon adds)
    /// as a heading over its aligned values; nested values flattened with dots.
    static func render(_ metrics: JSONValue) -> [String] {
        var lines: [String] = []
        for member in metrics.members ?? [] where member.key != "prometheus" {
            guard let entries = member.value.members else {
                lines.append("\(member.key): \(member.value.displayText)")
                continue
            }
            lines.append("\(member.key):")
            var values: [(String, String)] = []
            flatten(entries, prefix: "", into: &values)
            if values.isEmpty { lines.append("  (none)") }
            let width = values.map(\.0.count).max() ?? 0
            for (name, value) in values {
                lines.append("  " + name + String(repeating: " ", count: width - name.count + 2) + value)
            }
        }
        return lines
    }

    private static func flatten(_ members: [JSONValue.Member], prefix: String, into values: inout [(String, String)]) {
        for member in members {
            let name = prefix + member.key
            if let nested = member.value.members {
                flatten(nested, prefix: name + ".", into: &values)
            } else {
                values.append((name, member.value.displayText))
            }
        }
    }
}
