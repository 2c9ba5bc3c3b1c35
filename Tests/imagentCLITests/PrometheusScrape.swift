import Foundation
import IMAgentTestKit
import Testing

/// A scrape of imagentd's `[metrics] prometheus_listen`, parsed by Prometheus'
/// own Python parser (Debian's python3-prometheus-client): a scrape it refuses fails the test.
struct PrometheusScrape {
    /// Debian's interpreter: the parser is Debian's package, not in a pyenv.
    static let python = "/usr/bin/python3"

    /// {name: {type, help, samples}} as the parser read them.
    let families: [String: [String: Any]]

    /// Fetches `url` (or reads `text`) and parses it.
    init(url: String? = nil, text: String? = nil) async throws {
        let script = """
            import json, sys, urllib.request
            from prometheus_client.parser import text_string_to_metric_families
            text = urllib.request.urlopen(sys.argv[1], timeout=10).read().decode() if len(sys.argv) > 1 else sys.stdin.read()
            families = {}
            for family in text_string_to_metric_families(text):
                families[family.name] = {"type": family.type, "help": family.documentation,
                    "samples": [{"name": s.name, "labels": s.labels, "value": s.value} for s in family.samples]}
            print(json.dumps({"families": families}))
            """
        let output = try await ChildProcess.run(Self.python, ["-c", script] + (url.map { [$0] } ?? []), stdin: text ?? "",
                                                limit: .seconds(30))
        try #require(output.status == 0 && !output.signaled, "the Prometheus parser refused the scrape: \(output.stderr)")
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any])
        families = try #require(parsed["families"] as? [String: [String: Any]], "\(parsed)")
    }

    /// The sample `name{labels}`'s value (labels not given match anything).
    func value(_ name: String, labels: [String: String] = [:]) -> Double? {
        Self.value(in: families, name, labels: labels)
    }

    static func value(in families: [String: [String: Any]], _ name: String, labels: [String: String] = [:]) -> Double? {
        for family in families.values {
            for sample in family["samples"] as? [[String: Any]] ?? [] where sample["name"] as? String == name {
                let sampleLabels = sample["labels"] as? [String: String] ?? [:]
                if labels.allSatisfy({ sampleLabels[$0.key] == $0.value }) { return (sample["value"] as? NSNumber)?.doubleValue }
            }
        }
        return nil
    }

    /// The sum of every sample named `name` (all label values).
    func sum(_ name: String) -> Double {
        families.values.flatMap { $0["samples"] as? [[String: Any]] ?? [] }
            .filter { $0["name"] as? String == name }
            .reduce(0) { $0 + ((($1["value"] as? NSNumber)?.doubleValue) ?? 0) }
    }
}
