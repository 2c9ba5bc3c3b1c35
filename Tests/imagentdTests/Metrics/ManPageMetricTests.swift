import Foundation
import Testing

@testable import IMAgentCore

/// imagentd(8) METRICS and the registry agree: every metric the page names is
/// exported with the type and labels the page gives, and every exported
/// metric is on the page; imagent-ipc(7) names every member of METRICS' JSON.
@Suite struct ManPageMetricTests {
    struct Documented: Hashable {
        var type: String
        var labels: Set<String>
    }

    /// The METRICS section's entries: the bold names of the line after each
    /// `.TP` (labels in braces), and the type the paragraph starts with.
    static func documentedMetrics(_ text: String) -> [String: Documented] {
        var metrics: [String: Documented] = [:]
        var inSection = false
        var pending: [(String, Set<String>)]?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if line.hasPrefix(".SH ") {
                inSection = line == ".SH METRICS"
                continue
            }
            guard inSection else { continue }
            if line == ".TP" {
                pending = []
            } else if pending?.isEmpty == true, line.hasPrefix(".B") {
                pending = ManPageKeyTests.boldWords(line).filter { $0.hasPrefix("imagentd_") }.map { word in
                    let name = String(word.prefix { $0 != "{" })
                    let labels = word.drop { $0 != "{" }.dropFirst().prefix { $0 != "}" }
                    return (name, Set(labels.split(separator: ",").map(String.init)))
                }
            } else if let names = pending, !names.isEmpty {
                let word = String(line.prefix { $0.isLetter }).lowercased()
                let type = word.hasSuffix("s") ? String(word.dropLast()) : word
                for (name, labels) in names { metrics[name] = Documented(type: type, labels: labels) }
                pending = nil
            }
        }
        return metrics
    }

    /// A connected daemon's figures: every gauge known (RTT, heartbeat interval).
    static let connected = MetricsSnapshot(
        linkUp: true, connectAttempts: 1, reconnects: 0, traffic: .init(), rtt: .milliseconds(3),
        heartbeatInterval: .seconds(30), ipcClients: 1, sessions: 1, outboxMessages: 0, inboxMessages: 0,
        outboxBytes: 0, windowBytes: 0, messagesExpired: 0, messagesAccepted: 0, messagesReceived: 0, messagesResent: 0,
        messagesRedelivered: 0, storeFailures: 0, storeDatabaseBytes: 4096, storeWALBytes: 0)

    /// What the registry exports with every gauge known: `# TYPE` lines and the label names of the samples.
    static func exportedMetrics() -> [String: Documented] {
        let metrics = DaemonMetrics(version: "9.9.9")
        Self.connected.apply(to: metrics)
        let text = String(decoding: metrics.exposition(), as: UTF8.self)
        var exported: [String: Documented] = [:]
        for line in text.split(separator: "\n") {
            if line.hasPrefix("# TYPE ") {
                let parts = line.split(separator: " ")
                exported[String(parts[2])] = Documented(type: String(parts[3]), labels: [])
            } else if !line.hasPrefix("#"), let brace = line.firstIndex(of: "{") {
                var name = String(line[..<brace])
                for suffix in ["_bucket", "_sum", "_count"] where exported[name] == nil && name.hasSuffix(suffix) {
                    name = String(name.dropLast(suffix.count))
                }
                let labels = line[line.index(after: brace)...].prefix { $0 != "}" }.split(separator: ",")
                    .map { String($0.prefix { $0 != "=" }) }.filter { $0 != "le" }
                exported[name]?.labels.formUnion(labels)
            }
        }
        return exported
    }

    @Test func everyDocumentedMetricIsExported_withItsTypeAndLabels_andEveryExportedOneDocumented() throws {
        let page = try String(contentsOfFile: "man/imagentd.8", encoding: .utf8)
        let documented = Self.documentedMetrics(page)
        let exported = Self.exportedMetrics()
        #expect(documented.count >= 25, "the parser found only \(documented.keys.sorted())")
        #expect(Set(documented.keys).subtracting(exported.keys).sorted() == [], "documented in imagentd(8) but not exported")
        #expect(Set(exported.keys).subtracting(documented.keys).sorted() == [], "exported but not documented in imagentd(8)")
        for (name, page) in documented {
            guard let actual = exported[name] else { continue }
            #expect(page == actual, "\(name): imagentd(8) says \(page), the registry exports \(actual)")
        }
    }

    @Test func everyMemberOfMETRICS_isNamedInImagentIPC7() throws {
        let page = try String(contentsOfFile: "man/imagent-ipc.7", encoding: .utf8)
        let metrics = DaemonMetrics(version: "9.9.9")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(Self.connected.json(metrics).utf8)) as? [String: Any])
        var names: [String] = []
        func collect(_ value: Any, _ key: String) {
            names.append(key)
            // The members of these two are values (stages, the version), not names.
            guard let members = value as? [String: Any], !["link_handshake_stage_seconds", "build_info"].contains(key) else { return }
            for (name, member) in members where !["count", "sum"].contains(name) { collect(member, name) }
        }
        for (key, value) in object { collect(value, key) }
        #expect(names.count >= 30)
        for name in names {
            #expect(page.contains(name), "METRICS has \(name), which imagent-ipc(7) does not name")
        }
    }
}
