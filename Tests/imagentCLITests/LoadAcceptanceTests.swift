import Foundation
import Testing

/// Issue 4's acceptance: `imagent-loadgen` processes through the real
/// `imagentd` (SQLite store) to the real `imagent-refserver` (`--state`),
/// every echoed message checked by the load clients themselves: exactly
/// once, in order per session, intact.
///
/// Size: `IMAGENT_LOAD_MESSAGES` is the total number of messages each way in
/// the first two tests. The issue asks for 100,000; with debug builds on a
/// 2-core machine the daemon does about 750 (loaded by other builds) to 1,500
/// (quiet) round trips a second, 0.7 ms of daemon CPU each, so 100,000 takes
/// 2–3 minutes per test, more when CI runs other suites beside it. CI runs 20,000 by default (under a
/// minute each); run the full size with
/// `IMAGENT_LOAD_MESSAGES=100000 swift test --filter LoadAcceptanceTests`.
/// Each test prints the size that ran.
@Suite(.serialized)
struct LoadAcceptanceTests {
    static let processes = 10
    static let sessionsPerProcess = 10
    /// Messages each way over all 100 sessions.
    static let totalMessages = ProcessInfo.processInfo.environment["IMAGENT_LOAD_MESSAGES"].flatMap(Int.init) ?? 20_000

    @Test(.timeLimit(.minutes(10)))
    func hundredSessionsFromTenProcesses_everyMessageEchoedOnceInOrder() async throws {
        try await withLoadCluster { cluster in
            let perSession = Self.totalMessages / (Self.processes * Self.sessionsPerProcess)
            let run = try await runLoad(cluster, perSession: perSession, deadlineSeconds: 480)
            print("load, no faults: \(run.summary)")
            try run.expectAllPassed(cluster)
        }
    }

    @Test(.timeLimit(.minutes(10)))
    func linkDropsServerRestartsAndDaemonKills_loseNothing_duplicateNothing() async throws {
        try await withLoadCluster { cluster in
            let perSession = Self.totalMessages / (Self.processes * Self.sessionsPerProcess)
            let run = try await runLoad(cluster, perSession: perSession, deadlineSeconds: 480) { loadgens in
                // A fault every second while the load runs (a restart takes about as long), three of each kind at most.
                var faults: [String] = []
                let kinds = ["drop", "daemon", "server"]
                for round in 0..<9 {
                    try await Task.sleep(for: .seconds(1))
                    guard loadgens.contains(where: \.isRunning) else { break }
                    switch kinds[round % 3] {
                    case "drop":
                        faults.append("link drop (\(try cluster.admin("drop")))")
                    case "daemon":
                        try await cluster.killAndRestartDaemon()
                        faults.append("daemon kill -9 + restart")
                    default:
                        let killing = round % 2 == 1
                        try await cluster.restartServer(killing: killing)
                        faults.append("refserver \(killing ? "kill -9" : "SIGTERM") + restart on its --state")
                    }
                }
                return faults
            }
            print("load with faults: \(run.summary)")
            print("faults injected (\(run.faults.count)): \(run.faults.joined(separator: ", "))")
            try run.expectAllPassed(cluster)
            #expect(run.faults.count >= 3, "the load ended before one fault of each kind")
        }
    }

    @Test(.timeLimit(.minutes(6)))
    func oneClientStopsReadingFor30s_theOtherNineKeepFlowing_andItGetsEverythingAfter() async throws {
        try await withLoadCluster { cluster in
            // A small window, so latency is the daemon's and not the clients' own queue.
            let nine = ["--sessions", "10", "--messages", "100", "--window", "4", "--deadline", "240"]

            // Without a stuck client.
            let baseline = try await timed {
                try await (0..<9).map { try cluster.startLoadgen(tag: 100 + $0, arguments: nine) }.waitAll(within: .seconds(260))
            }

            // With one: it reads 50 messages, then the whole process stops (SIGSTOP) for 30 s, so its
            // socket is not read at all; its 256 × 10 messages of 4 KiB in flight come back meanwhile
            // and wait in the daemon (a run by hand showed ~2,400 in the daemon's inbox).
            let stuck = try cluster.startLoadgen(tag: 200, arguments: [
                "--sessions", "10", "--messages", "300", "--size", "4096", "--window", "256",
                "--stall-reading", "30", "--stall-after", "50", "--deadline", "240",
            ])
            let stallStart = ContinuousClock.now + .seconds(60)
            while !((try? String(contentsOfFile: stuck.errPath, encoding: .utf8)) ?? "").contains("stalling") {
                guard stuck.isRunning, ContinuousClock.now < stallStart else {
                    throw RealDaemonError("the stuck client never stalled: \(try await stuck.wait(within: .seconds(5)).json)")
                }
                try await Task.sleep(for: .milliseconds(50))
            }
            let stalledAt = ContinuousClock.now
            let during = try await timed {
                try await (0..<9).map { try cluster.startLoadgen(tag: 300 + $0, arguments: nine) }.waitAll(within: .seconds(260))
            }
            let ninePart = ContinuousClock.now - stalledAt
            let stuckReport = try await stuck.wait(within: .seconds(240))

            func p99s(_ reports: [LoadCluster.LoadReport]) -> String {
                reports.map { String(format: "%.1f", $0.double("p99_ms")) }.joined(separator: " ")
            }
            let worst = { (reports: [LoadCluster.LoadReport], key: String) in reports.map { $0.double(key) }.max() ?? -1 }
            print("stuck client: nine clients × 10 sessions × 100 messages; p99 ms per client without a stuck client: \(p99s(baseline.reports)) (worst \(worst(baseline.reports, "p99_ms")), longest gap \(worst(baseline.reports, "max_gap_ms")) ms, \(baseline.seconds) s)")
            print("stuck client: the same while one client did not read for 30 s: \(p99s(during.reports)) (worst \(worst(during.reports, "p99_ms")), longest gap \(worst(during.reports, "max_gap_ms")) ms, \(during.seconds) s; the nine finished \(ninePart) after the stall began)")
            print("stuck client: \(stuckReport.json)")

            for report in baseline.reports + during.reports {
                #expect(report.status == 0 && report.int("lost") == 0 && report.int("duplicated") == 0, "\(report.json)\n\(report.stderr)")
            }
            // No stall for the nine: none of them waited anything like the stuck client's 30 s.
            #expect(worst(during.reports, "max_gap_ms") < 15_000, "a client waited as long as the stuck one stalled")
            #expect(worst(during.reports, "p99_ms") < 15_000)
            // And the stuck client got everything afterwards, once each, in order.
            #expect(stuckReport.status == 0, "\(stuckReport.json)\n\(stuckReport.stderr)\n\(cluster.tail("imagentd.log"))")
            #expect(stuckReport.fields["stalled"] as? Bool == true)
            #expect(stuckReport.int("received") == 3000 && stuckReport.int("lost") == 0 && stuckReport.int("duplicated") == 0)
        }
    }

    /// The chaos suite's clients detach and attach while they stream (`--reattach-every`): the
    /// process closes its connection with sends and deliveries in flight, attaches its sessions
    /// again on a new one and goes on, keeping its own accounting across the gaps.
    @Test(.timeLimit(.minutes(4)))
    func aClientThatDetachesAndAttachesTwiceASecond_keepsItsAccounting_andTimesEveryEcho() async throws {
        try await withLoadCluster { cluster in
            let latencyFile = cluster.directory + "/latencies"
            let before = Date().timeIntervalSince1970
            let loadgen = try cluster.startLoadgen(tag: 7, arguments: [
                "--sessions", "4", "--messages", "1500", "--window", "16", "--reattach-every", "0.5",
                "--latency-file", latencyFile, "--deadline", "180",
            ])
            let report = try await loadgen.wait(within: .seconds(200))
            let after = Date().timeIntervalSince1970
            print("reattaching client: \(report.json)")
            #expect(report.status == 0, "\(report.json)\n\(report.stderr)\n\(cluster.tail("imagentd.log"))")
            #expect(report.int("received") == 6000 && report.int("lost") == 0)
            #expect(report.int("duplicated") == 0 && report.int("out_of_order") == 0 && report.int("seq_gaps") == 0)
            #expect(report.int("reattached") >= 2, "the run was too short to detach at all")
            #expect(report.int("reconnects") == 0, "a reattach is not a reconnection after the daemon went away")

            // One line per echo: when it was sent (Unix µs, inside the run) and its latency (µs).
            let lines = try String(contentsOfFile: latencyFile, encoding: .utf8).split(separator: "\n")
            #expect(lines.count == 6000)
            for line in lines {
                let words = line.split(separator: " ").compactMap { Double($0) }
                #expect(words.count == 2)
                guard words.count == 2 else { break }
                // An echo's latency is positive and within the run.
                #expect(words[0] / 1e6 >= before - 1 && words[0] / 1e6 <= after + 1 && words[1] > 0 && words[1] / 1e6 <= after - before)
            }
        }
    }

    /// A client killed with -9 and started again on its `--state` file, just after the daemon
    /// itself was killed and restarted: it attaches its sessions, takes the store's
    /// DELIVERED_SEQ from OPENED, and gets every message after it, also those the daemon
    /// sends right behind OPENED (the chaos suite once saw such a client wait for good).
    @Test(.timeLimit(.minutes(5)))
    func aClientKilledAndStartedAgainOnItsStateFile_getsEverythingAfterWhatItProcessed() async throws {
        try await withLoadCluster { cluster in
            // Killed at different moments of its re-attaching, so that some of its sessions have
            // echoes waiting in the daemon when the new process attaches them.
            for round in 1...6 {
                let state = cluster.directory + "/client-\(round).state"
                let arguments = ["--sessions", "5", "--messages", "4000", "--window", "32", "--state", state, "--deadline", "90"]
                let first = try cluster.startLoadgen(tag: round, arguments: arguments)
                try await Task.sleep(for: .milliseconds(1200))
                try await cluster.killAndRestartDaemon()
                try await Task.sleep(for: .milliseconds(150 * round))
                kill(first.process.processIdentifier, SIGKILL)
                _ = try? await first.wait(within: .seconds(10))
                let again = try cluster.startLoadgen(tag: round, arguments: arguments)
                let report = try await again.wait(within: .seconds(100))
                print("client restarted on its state file, round \(round): \(report.json)")
                #expect(report.status == 0, "\(report.json)\n\(report.stderr)\n\(cluster.tail("imagentd.log"))")
                #expect(report.int("received") == 20_000 && report.int("lost") == 0 && report.int("duplicated") == 0)
                #expect(report.int("out_of_order") == 0 && report.int("seq_gaps") == 0)
            }
        }
    }

    /// Issue 29's crash check at the daemon's level: 64 KiB messages, each written to a segment
    /// file beside the database (the message up and its echo down), while the daemon is killed
    /// (-9) and started again every second, so that it dies as segment files are filled, freed,
    /// kept as the spare and written over as the next one. Every echo arrives exactly once, in
    /// order, intact, and the segment numbers show the files came and went meanwhile.
    @Test(.timeLimit(.minutes(6)))
    func largeMessagesThroughSegmentFiles_daemonKilledAsTheyAreWrittenAndReused_loseNothing_duplicateNothing() async throws {
        try await withLoadCluster { cluster in
            let arguments = ["--sessions", "4", "--messages", "300", "--size", "65536", "--window", "32", "--deadline", "240"]
            let start = ContinuousClock.now
            let loadgens = try (0..<4).map { try cluster.startLoadgen(tag: 300 + $0, arguments: arguments) }
            var faults: [String] = []
            var highestSegment = 0
            while faults.count < 6, loadgens.contains(where: \.isRunning) {
                try await Task.sleep(for: .seconds(1))
                highestSegment = max(highestSegment, Self.segmentNumbers(in: cluster.directory).max() ?? 0)
                guard loadgens.contains(where: \.isRunning) else { break }
                try await cluster.killAndRestartDaemon()
                faults.append("daemon kill -9 + restart")
            }
            let reports = try await loadgens.waitAll(within: .seconds(270))
            let elapsed = ContinuousClock.now - start
            let run = Run(reports: reports, seconds: Double(elapsed.components.seconds), faults: faults)
            print("64 KiB messages with daemon kills: \(run.summary); highest segment file \(highestSegment)")
            try run.expectAllPassed(cluster)
            #expect(faults.count >= 3, "the load ended before three kills")
            // 16 MiB segments: 2 × 4,800 messages of 64 KiB fill dozens; each kill starts another at the open.
            #expect(highestSegment >= 8, "only segment files up to \(highestSegment) were seen")
        }
    }

    /// The numbers N of the store's `imagentd.sqlite3-payloads.N` files in `directory`.
    static func segmentNumbers(in directory: String) -> [Int] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.compactMap { name in
            guard let dot = name.range(of: "-payloads.") else { return nil }
            return Int(name[dot.upperBound...])
        }
    }

    // MARK: Helpers

    struct Run {
        var reports: [LoadCluster.LoadReport]
        var seconds: Double
        var faults: [String] = []

        func total(_ key: String) -> Int { reports.reduce(0) { $0 + $1.int(key) } }

        var summary: String {
            let received = total("received")
            let rate = seconds > 0 ? Double(received) / seconds : 0
            let p50 = reports.map { $0.double("p50_ms") }.sorted()
            let p99 = reports.map { $0.double("p99_ms") }.max() ?? -1
            return "\(reports.count) processes × \(reports.first?.int("sessions") ?? 0) sessions, "
                + "\(total("expected")) messages each way (IMAGENT_LOAD_MESSAGES=\(LoadAcceptanceTests.totalMessages)): "
                + "sent \(total("sent")) (resent \(total("resent"))), accepted \(total("accepted")), received \(received), "
                + "lost \(total("lost")), duplicated \(total("duplicated")), out of order \(total("out_of_order")), "
                + "redelivered and skipped \(total("redelivered_skipped")), reconnects \(total("reconnects")); "
                + "\(String(format: "%.1f", seconds)) s, \(String(format: "%.0f", rate)) msg/s round trip; "
                + "median of p50s \(p50.isEmpty ? -1 : p50[p50.count / 2]) ms, worst p99 \(p99) ms"
        }

        func expectAllPassed(_ cluster: LoadCluster) throws {
            for report in reports {
                #expect(report.status == 0, "\(report.json)\n\(report.stderr)\ndaemon log:\n\(cluster.tail("imagentd.log"))")
            }
            #expect(total("lost") == 0)
            #expect(total("duplicated") == 0)
            #expect(total("out_of_order") == 0)
            #expect(total("received") == total("expected"))
        }
    }

    /// Ten loadgens of ten sessions each; `meanwhile` runs beside them and returns what it did.
    private func runLoad(_ cluster: LoadCluster, perSession: Int, deadlineSeconds: Int,
                         meanwhile: (([LoadCluster.Loadgen]) async throws -> [String])? = nil) async throws -> Run {
        let arguments = ["--sessions", "\(Self.sessionsPerProcess)", "--messages", "\(perSession)", "--window", "32",
                         "--deadline", "\(deadlineSeconds)"]
        let start = ContinuousClock.now
        let loadgens = try (0..<Self.processes).map { try cluster.startLoadgen(tag: $0, arguments: arguments) }
        let faults = try await meanwhile?(loadgens) ?? []
        let reports = try await loadgens.waitAll(within: .seconds(deadlineSeconds + 30))
        let elapsed = ContinuousClock.now - start
        return Run(reports: reports, seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18,
                   faults: faults)
    }

    private func timed(_ body: () async throws -> [LoadCluster.LoadReport]) async throws -> Run {
        let start = ContinuousClock.now
        let reports = try await body()
        let elapsed = ContinuousClock.now - start
        return Run(reports: reports, seconds: (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18).rounded())
    }
}

extension Array where Element == LoadCluster.Loadgen {
    func waitAll(within limit: Duration) async throws -> [LoadCluster.LoadReport] {
        var reports: [LoadCluster.LoadReport] = []
        for loadgen in self { reports.append(try await loadgen.wait(within: limit)) }
        return reports
    }
}
