import Foundation

/// One run of `imagent-chaos partition`: namespaces, server, daemon with the
/// packaged defaults, one paced echo session, the partitions in turn, the
/// report. Everything it creates is removed by `Children.cleanUp()`.
struct PartitionRun {
    /// After each heal, this long without faults: the backlog drains and the
    /// link settles before the next cut.
    static let settleSeconds = 20.0
    static let warmupSeconds = 5.0
    static let echoIntervalMS = 200

    let partitions: [Double]
    let boundMS: Int
    let keepDirectory: Bool

    struct Heal {
        var partitionSeconds: Double
        var cutMS: Int64
        var healMS: Int64
        /// The first echo that arrived after the heal, − the heal.
        var firstEchoMS: Int64?
        /// `connected_since_ms` after the heal − the heal (nil: the link never dropped).
        var linkBackMS: Int64?
        /// The daemon's last error when the link was seen down during the partition.
        var detectedAs: String?
    }

    struct Report {
        var heals: [Heal]
        var boundMS: Int
        var loadgen: [String: Any]
        var loadgenJSON: String

        var firstEchoes: [Int64] { heals.compactMap(\.firstEchoMS).sorted() }

        /// The nearest-rank 95th percentile; every heal must have an echo.
        var p95MS: Int64? {
            guard firstEchoes.count == heals.count, !firstEchoes.isEmpty else { return nil }
            let rank = Int((0.95 * Double(firstEchoes.count)).rounded(.up)) - 1
            return firstEchoes[max(0, rank)]
        }

        var loadgenPassed: Bool { loadgen["passed"] as? Bool == true }
        var passed: Bool { loadgenPassed && (p95MS.map { $0 <= Int64(boundMS) } ?? false) }

        var text: String {
            var lines = ["== partition: packaged defaults, an echo every \(PartitionRun.echoIntervalMS) ms"]
            for heal in heals {
                let echo = heal.firstEchoMS.map { "\($0) ms" } ?? "NONE"
                let link = heal.linkBackMS.map { "link back \($0) ms after the heal" } ?? "link stayed up"
                lines.append("  \(format(heal.partitionSeconds)) s partition: first echo \(echo) after the heal; \(link)"
                    + (heal.detectedAs.map { " (\($0))" } ?? ""))
            }
            lines.append("  heal → first echo p95 \(p95MS.map { "\($0) ms" } ?? "-") (bound \(boundMS) ms); "
                + "loadgen: \(loadgenJSON)")
            lines.append(passed ? "PASSED" : "FAILED")
            return lines.joined(separator: "\n")
        }

        var json: String {
            let heals = heals.map { heal in
                "{\"partition_s\":\(format(heal.partitionSeconds)),\"first_echo_ms\":\(heal.firstEchoMS.map(String.init) ?? "null"),"
                    + "\"link_back_ms\":\(heal.linkBackMS.map(String.init) ?? "null")}"
            }
            return "{\"heals\":[\(heals.joined(separator: ","))],\"p95_ms\":\(p95MS.map(String.init) ?? "null"),"
                + "\"bound_ms\":\(boundMS),\"loadgen\":\(loadgenJSON),\"passed\":\(passed)}"
        }
    }

    func run() async throws -> Report {
        Topology.removeStale()
        var template = Array("/tmp/imagent-partition-\(getpid())-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw ChaosError("mkdtemp failed") }
        let directory = String(cString: made)
        if !keepDirectory {
            Children.shared.onCleanup("run directory") { try? FileManager.default.removeItem(atPath: directory) }
        }
        Log.line("run directory \(directory)")
        let topology = Topology()
        try topology.create()
        let cluster = try Cluster(directory: directory, topology: topology, packagedDefaults: true)
        try await cluster.startServer()
        try await cluster.startDaemon(.direct)
        let monitor = LinkMonitor(socketPath: cluster.socketPath)
        monitor.start()
        defer { monitor.stop() }
        guard await monitor.waitConnected(after: cluster.daemonStartedMS, seconds: 30) != nil else {
            throw ChaosError("the daemon did not connect; its log:\n\(tail(directory + "/imagentd.log"))")
        }

        let total = Self.warmupSeconds + partitions.reduce(0) { $0 + $1 + Self.settleSeconds }
        let messages = Int(total * 1000) / Self.echoIntervalMS
        let latencyPath = directory + "/loadgen.latency"
        let outPath = directory + "/loadgen.out"
        let loadgen = try Children.shared.spawn("imagent-loadgen", Binaries.loadgen, [
            "--socket", cluster.socketPath, "--sessions", "1", "--messages", "\(messages)",
            "--interval-ms", "\(Self.echoIntervalMS)", "--window", "64", "--deadline", "\(Int(total) + 120)",
            "--latency-file", latencyPath,
        ], log: directory + "/loadgen.err", stdout: outPath)
        Log.line("\(messages) echoes, one every \(Self.echoIntervalMS) ms; partitions \(partitions.map(format).joined(separator: ", ")) s")
        try await Task.sleep(for: .seconds(Self.warmupSeconds))

        var heals: [Heal] = []
        for seconds in partitions {
            let cutMS = wallMS()
            guard topology.partition() else { throw ChaosError("nft: could not drop the traffic") }
            try await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
            let down = monitor.latest.flatMap { $0.state == "connected" ? nil : $0.lastError }
            let healMS = wallMS()
            topology.clearFilter()
            // A link still up at the heal may be replaced a moment later (the
            // probe beside a suspected link): wait for a new one, not any.
            let back = await monitor.waitNewLink(after: healMS, since: cutMS, seconds: Self.settleSeconds)
            let linkBack = back?.connectedSinceMS.map { $0 - healMS }
            Log.line("\(format(seconds)) s partition healed; link \(linkBack.map { "back \($0) ms after the heal" } ?? "stayed up")")
            heals.append(Heal(partitionSeconds: seconds, cutMS: cutMS, healMS: healMS, firstEchoMS: nil,
                              linkBackMS: linkBack, detectedAs: down ?? back?.lastError))
            let settled = Date(timeIntervalSince1970: Double(healMS) / 1000 + Self.settleSeconds)
            if settled.timeIntervalSinceNow > 0 { try await Task.sleep(for: .milliseconds(Int64(settled.timeIntervalSinceNow * 1000))) }
        }

        Log.line("partitions done; waiting for every echo")
        let deadline = Date().addingTimeInterval(150)
        while loadgen.isRunning, Date() < deadline { try await Task.sleep(for: .milliseconds(100)) }
        if loadgen.isRunning { await Children.shared.kill9(loadgen) }

        var latencies = Latencies()
        latencies.read(latencyPath)
        let arrivalsMS = latencies.samples.map { ($0.sentUS + $0.latencyUS) / 1000 }.sorted()
        for index in heals.indices {
            let heal = heals[index].healMS
            heals[index].firstEchoMS = arrivalsMS.first { $0 > heal }.map { $0 - heal }
        }
        let out = (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? ""
        let line = out.split(separator: "\n").last.map(String.init) ?? "{}"
        let fields = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any] ?? [:]
        let report = Report(heals: heals, boundMS: boundMS, loadgen: fields, loadgenJSON: line.isEmpty ? "{}" : line)
        if !report.passed {
            FileHandle.standardError.write(Data("-- imagentd.log\n\(tail(directory + "/imagentd.log", bytes: 6000))\n".utf8))
        }
        return report
    }
}
