/// BENCHMARKS.md's tables of a `compare` run, filled as its paths are measured: IMLink against the
/// bridge and direct TCP (one row per payload), and imagentd over MQTT against the bridge and a
/// direct MQTT client (one column per payload).
struct CompareSummary {
    /// What a path did at one payload size.
    struct Result {
        var oneWay: Double
        var p50: Double
        var oneWayCPU: Double?
        /// Bytes written to disk per payload byte one way (both brokers' for the bridge).
        var oneWayDisk: Double? = nil
        /// At `power`, one-way payload bytes/s ÷ the disk probe's beside this daemon's store.
        var probeRatio: Double? = nil
    }

    enum Path: Hashable {
        case imagentd, mqtt, directMQTT, directTCP
        case bridge(String)
    }

    /// The first bridge's tuning (the ratios' baseline), as `compare` names it: "as shipped".
    let baselineBridge: String
    /// Payload labels, in the order measured.
    private var payloads: [String] = []
    private var results: [String: [Path: Result]] = [:]

    init(baselineBridge: String) { self.baselineBridge = baselineBridge }

    mutating func record(_ payload: String, _ path: Path, _ result: Result) {
        if results[payload] == nil { payloads.append(payload) }
        results[payload, default: [:]][path] = result
    }

    /// The disk probe's ratio for a path already recorded.
    mutating func recordProbe(_ payload: String, _ path: Path, ratio: Double) {
        results[payload]?[path]?.probeRatio = ratio
    }

    /// One row per payload measured through imagentd; nil if none was.
    var imlinkTable: MarkdownTable? {
        let bridge = Path.bridge(baselineBridge)
        var table = MarkdownTable([.number("size"), .number("imagentd one way msg/s"), .number("÷ bridge \(baselineBridge)"),
                                   .number("÷ direct TCP"), .number("imagentd CPU µs/msg"), .number("imagentd disk B/payload B"),
                                   .number("÷ disk probe"), .number("round-trip p50 ms"), .number("bridge \(baselineBridge) msg/s"),
                                   .number("bridge disk B/payload B"), .number("direct TCP msg/s")])
        for payload in payloads {
            guard let row = results[payload], let imagentd = row[.imagentd] else { continue }
            table.add([payload, rate(imagentd), ratio(imagentd, row[bridge]), ratio(imagentd, row[.directTCP]),
                       imagentd.oneWayCPU.map { format($0, decimals: 1) } ?? "", disk(imagentd.oneWayDisk),
                       imagentd.probeRatio.map(ratioLabel) ?? "", format(imagentd.p50, decimals: 3),
                       row[bridge].map(rate) ?? "", disk(row[bridge]?.oneWayDisk), row[.directTCP].map(rate) ?? ""])
        }
        return table.rows.isEmpty ? nil : table
    }

    /// One way and round-trip p50 of the bridge, imagentd over MQTT and the direct MQTT client; nil without the MQTT row.
    var mqttTable: MarkdownTable? {
        guard payloads.contains(where: { results[$0]?[.mqtt] != nil }) else { return nil }
        let bridge = Path.bridge(baselineBridge)
        var table = MarkdownTable([.text("path"), .text("figure")] + payloads.map { .number($0) })
        func add(_ path: Path, _ name: String, _ figure: String, _ cell: (Result, [Path: Result]) -> String) {
            guard payloads.contains(where: { results[$0]?[path] != nil }) else { return }
            table.add([name, figure] + payloads.map { payload in
                guard let row = results[payload], let result = row[path] else { return "" }
                return cell(result, row)
            })
        }
        add(bridge, "mosquitto bridge, \(baselineBridge)", "one way msg/s") { result, _ in rate(result) }
        add(.mqtt, "imagentd over MQTT", "one way msg/s (÷ bridge)") { result, row in
            rate(result) + (row[bridge].map { " (\(ratioLabel(result.oneWay / $0.oneWay)))" } ?? "")
        }
        add(.directMQTT, "direct MQTT client", "one way msg/s") { result, _ in rate(result) }
        // Rows of figures not measured (no /proc/PID/io; no probe at `process`) are left out.
        func has(_ path: Path, _ figure: (Result) -> Double?) -> Bool {
            payloads.contains { results[$0]?[path].flatMap(figure) != nil }
        }
        if has(bridge, \.oneWayDisk) {
            add(bridge, "mosquitto bridge, \(baselineBridge)", "disk B/payload B one way (both brokers)") { result, _ in disk(result.oneWayDisk) }
        }
        if has(.mqtt, \.oneWayDisk) {
            add(.mqtt, "imagentd over MQTT", "disk B/payload B one way") { result, _ in disk(result.oneWayDisk) }
        }
        if has(.mqtt, \.probeRatio) {
            add(.mqtt, "imagentd over MQTT", "payload bytes/s ÷ disk probe") { result, _ in result.probeRatio.map(ratioLabel) ?? "" }
        }
        add(.mqtt, "imagentd over MQTT", "round-trip p50 ms (− direct MQTT client)") { result, row in
            format(result.p50, decimals: 3) + (row[.directMQTT].map { " (\(signed(result.p50 - $0.p50)))" } ?? "")
        }
        add(.directMQTT, "direct MQTT client", "round-trip p50 ms") { result, _ in format(result.p50, decimals: 3) }
        return table
    }

    private func rate(_ result: Result) -> String { grouped(Int(result.oneWay)) }

    private func disk(_ bytesPerPayloadByte: Double?) -> String { bytesPerPayloadByte.map { format($0, decimals: 2) } ?? "" }

    private func ratio(_ result: Result, _ baseline: Result?) -> String {
        baseline.map { ratioLabel(result.oneWay / $0.oneWay) } ?? ""
    }

    private func signed(_ milliseconds: Double) -> String {
        (milliseconds < 0 ? "" : "+") + format(milliseconds, decimals: 3)
    }
}
