#if canImport(Glibc)
import Glibc
#endif
import IMAgentTestKit
import Logging
import RefServer

struct CompareBenchOptions: Sendable {
    var messages = 20_000
    var requests = 1_000
    var sizes = [64, 1024, 65_536]
    /// Concurrent sessions per row: each gets its own client (and, for
    /// mosquitto, its own pair of MQTT clients and topics).
    var sessionCounts = [1, 100]
    var durability = "power"
    /// Messages not yet done, at most, summed over a row's sessions.
    var window = 256
    var tunings = MosquittoBridge.Tuning.allCases
    /// The paths measured (`--rows`); the brokers and daemons start regardless.
    var rows = Set(CompareRow.allCases)
    /// Who answers the MQTT row (`--mqtt-backend`): the bench, as for the direct MQTT client, or the Python example.
    var mqttBackend = MQTTUpstream.Backend.bench
    var timeLimitSeconds = 1_800
    /// At `power`, how long each disk probe runs (`--probe-seconds`).
    var probeSeconds = 2.0
    /// The probe's payloads per batch (`--probe-batch`); nil for the daemon's own payloads per commit over
    /// the one-way run, or `defaultProbeBatch` if METRICS does not give them.
    var probeBatch: Int?
    static let defaultProbeBatch = 16
}

/// A path of `compare`, as `--rows` names it.
enum CompareRow: String, CaseIterable, Sendable {
    case imagentd, bridge, mqtt
    case directMQTT = "direct-mqtt"
    case directTCP = "direct-tcp"
}

/// `imagent-bench compare`: one workload through imagentd, through two
/// bridged mosquitto brokers (as shipped and tuned) and straight to the
/// reference server, in one run, printed as a Markdown table with ratios.
func runCompareBench(_ options: CompareBenchOptions) async -> Int32 {
    startWatchdog(seconds: options.timeLimitSeconds)
    let token = benchToken
    var serverDirectory: String?
    defer { serverDirectory.map(removeDirectory) }
    var bridges: [(MosquittoBridge.Tuning, MosquittoBridge)] = []
    var started: DaemonProcess?
    var mqtt: (MosquittoBridge.Tuning, MQTTUpstream)?
    do {
        let server: RefServer
        (server, serverDirectory) = try await startReferenceServer()
        let daemon = try await DaemonProcess(serverAddress: server.address, token: token, durability: options.durability,
                                             maxSessions: 1_000)
        temporaryDirectories.append(daemon.directory)
        started = daemon
        for tuning in options.tunings { bridges.append((tuning, try await MosquittoBridge(tuning: tuning))) }
        try await waitForLink(daemon)
        // imagentd over MQTT, through the first bridge's upstream broker (the same broker the bridge feeds).
        if let (tuning, bridge) = bridges.first {
            let upstream = try await MQTTUpstream(brokerPort: bridge.upstreamPort, token: token, durability: options.durability,
                                             backend: options.mqttBackend)
            mqtt = (tuning, upstream)
            try await waitForLink(upstream.daemon)
        }

        print("machine: \(sysconf(Int32(_SC_NPROCESSORS_ONLN))) cores, load average \(loadAverage()) at start")
        print("paths: imagentd (durability \"\(options.durability)\", release build) to the in-process reference server; "
              + "mosquitto \(mosquittoVersion()) local broker bridged at QoS 1 to an upstream mosquitto "
              + "(\(options.tunings.map(\.rawValue).joined(separator: ", "))); direct TCP to the same reference server")
        print("one-way: \(grouped(options.messages)) messages, done when the far side has them all (server ACK of the last "
              + "for imagentd and direct; arrival at the upstream subscriber for mosquitto); round trip: echoed back; "
              + "at most \(options.window) messages not yet done in all. Latency: \(grouped(options.requests)) "
              + "request/response pairs per session, one at a time per session.")
        print("")
        print("CPU µs/msg: user + sys time of imagentd (of both brokers for mosquitto) per message, over that run alone.")
        print(diskColumnMethod(of: "imagentd (both brokers for mosquitto; the upstream one for the direct MQTT client)"))
        if options.durability == "power" {
            print("disk probe (at power, after each imagentd row): in that imagentd's store directory, for \(format(options.probeSeconds, decimals: 1)) s, "
                  + "batches of that payload size, each payload one pwrite to a payload file, fdatasync, then 4 KiB to a second "
                  + "file and fdatasync (segment, then WAL commit); batch: \(options.probeBatch.map { "\($0) (--probe-batch)" } ?? "imagentd's payloads per store commit over the one-way run (METRICS)"). "
                  + "imagentd ÷ disk probe: its one-way payload bytes/s over the probe's.")
        }
        print("")
        print("| payload | sessions | path | one-way msg/s | round-trip msg/s | p50 ms | p99 ms | CPU µs/msg one-way | CPU µs/msg round trip "
              + "| disk B/payload B one-way | disk B/payload B round trip |")
        print("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        let (host, port, socket) = (server.host, server.port, daemon.socketPath)
        var failedRows = 0
        var summary = CompareSummary(baselineBridge: options.tunings[0].rawValue)
        for sessions in options.sessionCounts {
            for size in options.sizes {
                let label = sizeLabel(size)
                let payload = label + (options.sessionCounts == [1] ? "" : " × \(sessions) sessions")
                func row(_ path: String, _ figures: Figures) {
                    print("| \(label) | \(sessions) | \(path) | \(grouped(Int(figures.oneWay))) | \(grouped(Int(figures.roundTrip))) "
                          + "| \(format(figures.p50, decimals: 3)) | \(format(figures.p99, decimals: 3)) "
                          + "| \(figures.oneWayCPU == nil ? "" : microseconds(figures.oneWayCPU)) "
                          + "| \(figures.roundTripCPU == nil ? "" : microseconds(figures.roundTripCPU)) "
                          + "| \(figures.oneWayDisk.map { format($0, decimals: 2) } ?? "") | \(figures.roundTripDisk.map { format($0, decimals: 2) } ?? "") |")
                }
                func ratio(_ name: String, _ a: Figures, _ b: Figures) {
                    print("| \(label) | \(sessions) | \(name) | \(format(a.oneWay / b.oneWay, decimals: 2))× "
                          + "| \(format(a.roundTrip / b.roundTrip, decimals: 2))× | \(format(a.p50 / b.p50, decimals: 2))× "
                          + "| \(format(a.p99 / b.p99, decimals: 2))× | | | | |")
                }
                let shape = Shape(sessions: sessions, messages: options.messages, requests: options.requests, window: options.window)
                /// One path's row; a path that fails prints a FAILED row and the run goes on.
                func measured(_ path: String, _ summaryPath: CompareSummary.Path, cpuOf pids: [Int32] = [], commitsOf socket: String? = nil,
                              _ run: @escaping @Sendable (Completion, Int, Int) async throws -> RunResult) async -> Figures? {
                    do {
                        let figures = try await withDeadline(600, "\(label) × \(sessions) through \(path)") {
                            try await shape.figures(size: size, cpuOf: pids, commitsOf: socket, run)
                        }
                        row(path, figures)
                        summary.record(payload, summaryPath, .init(oneWay: figures.oneWay, p50: figures.p50, oneWayCPU: figures.oneWayCPU,
                                                                   oneWayDisk: figures.oneWayDisk))
                        return figures
                    } catch {
                        print("| \(label) | \(sessions) | \(path) | FAILED: \(error) | | | | | | | |")
                        failedRows += 1
                        return nil
                    }
                }
                /// At `power`, the disk probe beside `daemon`'s store after its row, and the row's one-way payload
                /// bytes/s over the probe's, printed and kept for the summary.
                func probe(_ name: String, _ summaryPath: CompareSummary.Path, _ figures: Figures?, beside daemon: DaemonProcess) {
                    guard options.durability == "power", let figures else { return }
                    let observed = figures.oneWayPayloadsPerCommit.map { max(1, Int($0.rounded())) }
                    let batch = options.probeBatch ?? observed ?? CompareBenchOptions.defaultProbeBatch
                    let source = options.probeBatch != nil ? "--probe-batch"
                        : figures.oneWayPayloadsPerCommit.map { "\(name)'s \(format($0, decimals: 1)) payloads per commit one way" }
                        ?? "the default; METRICS gave no commits"
                    let path = "disk probe beside \(name)'s store (batch: \(source))"
                    do {
                        let result = try DiskProbe(size: size, batch: batch, seconds: options.probeSeconds, directory: daemon.directory).run()
                        print("| \(label) | \(sessions) | \(path): \(result.summary) | \(grouped(Int(result.payloadsPerSecond))) | | | | | | | |")
                        let ratio = result.ratio(ofPayloadBytesPerSecond: figures.oneWay * Double(size))
                        print("| \(label) | \(sessions) | \(name) ÷ disk probe, payload bytes/s | \(ratioLabel(ratio)) | | | | | | | |")
                        summary.recordProbe(payload, summaryPath, ratio: ratio)
                    } catch {
                        print("| \(label) | \(sessions) | \(path) | FAILED: \(error) | | | | | | | |")
                        failedRows += 1
                    }
                }
                let rows = options.rows
                let imagent = !rows.contains(.imagentd) ? nil : await measured("imagentd", .imagentd, cpuOf: [daemon.pid],
                                                                               commitsOf: socket) { completion, count, window in
                    try await runThroughDaemon(socketPath: socket, completion: completion, size: size, count: count, window: window)
                }
                probe("imagentd", .imagentd, imagent, beside: daemon)
                var brokers: [(MosquittoBridge.Tuning, Figures)] = []
                for (tuning, bridge) in bridges where rows.contains(.bridge) {
                    let (local, upstream) = (bridge.localPort, bridge.upstreamPort)
                    let figures = await measured("mosquitto bridge, \(tuning.rawValue)", .bridge(tuning.rawValue), cpuOf: bridge.pids) { completion, count, window in
                        try await runThroughMosquitto(localPort: local, upstreamPort: upstream, completion: completion, size: size, count: count, window: window)
                    }
                    if let figures { brokers.append((tuning, figures)) }
                }
                var overMQTT: (MosquittoBridge.Tuning, Figures)?
                if let (tuning, upstream) = mqtt, rows.contains(.mqtt) {
                    let mqttSocket = upstream.daemon.socketPath
                    let figures = await measured("imagentd over MQTT (mosquitto \(tuning.rawValue) upstream)", .mqtt, cpuOf: upstream.pids,
                                                 commitsOf: mqttSocket) { completion, count, window in
                        try await runThroughDaemon(socketPath: mqttSocket, completion: completion, size: size, count: count, window: window)
                    }
                    probe("imagentd over MQTT", .mqtt, figures, beside: upstream.daemon)
                    overMQTT = figures.map { (tuning, $0) }
                }
                // The baseline of the MQTT row's latency target: one client publishing at QoS 1 straight to
                // the same upstream broker, answered by this process (not by the Python backend).
                var directMQTT: Figures?
                if let (tuning, bridge) = bridges.first, mqtt != nil, rows.contains(.directMQTT) {
                    let port = bridge.upstreamPort
                    // CPU: the upstream broker's alone (whether it is the ceiling of one QoS 1 publisher).
                    directMQTT = await measured("direct MQTT client (mosquitto \(tuning.rawValue) upstream)", .directMQTT,
                                                cpuOf: [bridge.pids[0]]) { completion, count, window in
                        try await runThroughMosquitto(localPort: port, upstreamPort: port, completion: completion, size: size,
                                                      count: count, window: window, topicRoot: "direct/")
                    }
                }
                let direct = !rows.contains(.directTCP) ? nil : await measured("direct TCP", .directTCP) { completion, count, window in
                    try await runDirect(host: host, port: port, token: token, completion: completion, size: size,
                                        count: count, window: window)
                }
                if let (tuning, figures) = overMQTT, let bridge = brokers.first(where: { $0.0 == tuning })?.1 {
                    ratio("imagentd over MQTT ÷ mosquitto \(tuning.rawValue)", figures, bridge)
                }
                if let (_, figures) = overMQTT, let directMQTT {
                    ratio("imagentd over MQTT ÷ direct MQTT client", figures, directMQTT)
                    print("| \(label) | \(sessions) | imagentd over MQTT − direct MQTT client (ms) | | "
                          + "| \(format(figures.p50 - directMQTT.p50, decimals: 3)) | \(format(figures.p99 - directMQTT.p99, decimals: 3)) | | | | |")
                }
                guard let imagent else { continue }
                for (tuning, figures) in brokers { ratio("imagentd ÷ mosquitto \(tuning.rawValue)", imagent, figures) }
                if let direct { ratio("imagentd ÷ direct", imagent, direct) }
            }
        }
        print("")
        let memory = bridges.map { "mosquitto \($0.0.rawValue): local \(mib($0.1.memory.local)), upstream \(mib($0.1.memory.upstream))" }
        print("RSS at the end: imagentd \(mib(daemon.memory().rss)); " + memory.joined(separator: "; "))
        print("load average \(loadAverage()) at the end")
        let tables = [summary.imlinkTable, summary.mqttTable].compactMap { $0 }
        if !tables.isEmpty { await printMarkdown(tables) }
        await daemon.stop()
        await mqtt?.1.stop()
        for (_, bridge) in bridges { await bridge.stop() }
        try? await server.stop()
        if failedRows > 0 { print("imagent-bench compare: \(failedRows) row(s) FAILED (see the table)") }
        return failedRows == 0 ? 0 : 1
    } catch {
        print("imagent-bench compare: \(error)")
        if let log = bridges.first?.1.log, !log.isEmpty { print("mosquitto's log (tail):\n\(String(log.suffix(2000)))") }
        if let daemon = started { print("imagentd's log (tail):\n\(String(daemon.log.suffix(2000)))") }
        if let upstream = mqtt?.1 { print("imagentd over MQTT's log (tail):\n\(String(upstream.daemon.log.suffix(2000)))") }
        await started?.stop()
        await mqtt?.1.stop()
        for (_, bridge) in bridges { await bridge.stop() }
        return 1
    }
}

/// How a row's work is split over its sessions: each runs its share at the
/// same time, with its share of the window; rates are total messages over
/// the slowest session's time, latencies are pooled.
private struct Shape: Sendable {
    var sessions: Int
    var messages: Int
    var requests: Int
    var window: Int

    func figures(size: Int, cpuOf pids: [Int32], commitsOf socket: String?,
                 _ run: @escaping @Sendable (Completion, Int, Int) async throws -> RunResult) async throws -> Figures {
        let (sessions, perSession) = (self.sessions, max(1, messages / sessions))
        let perSessionWindow = max(1, window / sessions)
        let requestsPerSession = max(1, requests / sessions)
        return try await Figures(count: perSession * sessions, requests: requestsPerSession * sessions, window: window,
                                 size: size, cpuOf: pids, commitsOf: socket) { completion, _, window in
            let (count, windowShare) = window == 1 ? (requestsPerSession, 1) : (perSession, perSessionWindow)
            return try await withThrowingTaskGroup(of: RunResult.self) { group in
                for _ in 0..<sessions { group.addTask { try await run(completion, count, windowShare) } }
                var combined = RunResult(elapsed: .zero, latencies: [])
                for try await result in group {
                    combined.elapsed = max(combined.elapsed, result.elapsed)
                    combined.latencies += result.latencies
                }
                return combined
            }
        }
    }
}

private func mosquittoVersion() -> String {
    // The Debian package's version, from dpkg's status file: no child process needed.
    let status = readFile("/var/lib/dpkg/status") ?? ""
    guard let start = status.firstRange(of: "Package: mosquitto\n") else { return "(version unknown)" }
    for line in status[start.upperBound...].split(separator: "\n").prefix(12) where line.hasPrefix("Version: ") {
        return String(line.dropFirst("Version: ".count))
    }
    return "(version unknown)"
}
