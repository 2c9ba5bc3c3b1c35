import Foundation
import IMAgentTestKit

/// One run of the suite, start to end: the namespaces, the first-connect
/// figures, the server and daemon, the load, the schedule of faults, the
/// drain, the report. Everything it creates is removed by `Children.cleanUp()`
/// on every way out.
struct ChaosRun {
    let plan: ChaosPlan
    let keepDirectory: Bool
    var upstream: Upstream = .imlink
    var broker: MQTTBroker = .mosquitto

    func run() async throws -> ChaosReport {
        let started = Date()
        Topology.removeStale()
        let directory = try makeDirectory()
        if !keepDirectory {
            Children.shared.onCleanup("run directory") { try? FileManager.default.removeItem(atPath: directory) }
        }
        Log.line("run directory \(directory)")
        let topology = Topology()
        try topology.create()
        Log.line("namespaces \(topology.agentNamespace) (\(topology.agentAddress), imagentd) and "
            + "\(topology.serverNamespace) (\(topology.serverAddress), \(upstream == .mqtt ? "\(broker.rawValue) and the echo backend" : "imagent-refserver")), veth \(topology.agentLink)–\(topology.serverLink)")

        var problems: [String] = []
        let loopback = try await firstConnectOnLoopback(directory: directory + "/loopback", topology: topology)
        if loopback == nil { problems.append("the daemon did not connect on loopback within 30 s") }

        let cluster = try Cluster(directory: directory, topology: topology, upstream: upstream, broker: broker)
        try await cluster.startServer()
        try await cluster.startDaemon(.direct)
        let monitor = LinkMonitor(socketPath: cluster.socketPath)
        monitor.start()
        let first = await monitor.waitConnected(after: cluster.daemonStartedMS, seconds: 30)
        let veth = first?.connectedSinceMS.map { $0 - cluster.daemonStartedMS }
        guard veth != nil else { throw ChaosError("the daemon did not connect to the server over the veth; its log:\n\(tail(directory + "/imagentd.log"))") }
        Log.line("first connect: loopback \(loopback.map { "\($0) ms" } ?? "-"), veth \(veth!) ms")

        let fleet = LoadFleet(shape: plan.fleet, directory: directory, socketPath: cluster.socketPath)
        try fleet.start()
        let director = FaultDirector(topology: topology, cluster: cluster, fleet: fleet, monitor: monitor, seed: plan.seed)
        // Feeding stops early enough for the last loadgens to finish inside the time limit.
        let drainAllowance = min(240, plan.timeLimitSeconds / 4)
        let feedUntil = started.addingTimeInterval(plan.timeLimitSeconds - drainAllowance)
        var phases: [PhaseRecord] = []
        var pass = 0
        var cut = false
        repeat {
            pass += 1
            if plan.mode == .long { Log.line("pass \(pass) of the schedule; \(fleet.messagesStarted) messages started") }
            for fault in plan.schedule {
                guard Date() < feedUntil else {
                    cut = true
                    break
                }
                phases.append(try await director.run(fault))
            }
        } while !cut && plan.repeatUntilMessages.map({ fleet.messagesStarted < $0 }) == true
        var notes: [String] = []
        if cut, plan.mode == .short {
            problems.append("the time limit stopped the schedule before every fault had run")
        } else if cut {
            notes.append("the time limit stopped the schedule after \(fleet.messagesStarted) messages each way were started"
                + (plan.repeatUntilMessages.map { " (of \($0) asked for)" } ?? ""))
        }

        Log.line("schedule done; waiting for the running loadgens to finish")
        fleet.stopFeeding()
        let drainStart = wallMS()
        let drained = await fleet.drain(seconds: max(30, feedUntil.addingTimeInterval(drainAllowance - 15).timeIntervalSinceNow))
        phases.append(PhaseRecord(name: "drain (no faults)", startMS: drainStart, endMS: wallMS()))
        if !drained { problems.append("loadgens still running at the end of the drain") }
        monitor.stop()

        var latencies = Latencies()
        for report in fleet.reports { latencies.read(report.latencyPath) }
        var report = ChaosReport(plan: plan, phases: phases, reports: fleet.reports, latencies: latencies,
                                 firstConnectLoopbackMS: loopback, firstConnectVethMS: veth,
                                 elapsedSeconds: Date().timeIntervalSince(started), drained: drained, problems: problems,
                                 notes: notes)
        for recovery in report.recoveries {
            if case .notBack = recovery.outcome { report.problems.append("\(recovery.fault): the link did not come back") }
        }
        if !report.passed { printTails(directory: directory, report: report) }
        return report
    }

    /// Daemon start → LOGIN_OK with the server on 127.0.0.1 in the daemon's own namespace, no fault.
    private func firstConnectOnLoopback(directory: String, topology: Topology) async throws -> Int64? {
        let cluster = try Cluster(directory: directory, topology: topology, serverOnLoopback: true, upstream: upstream, broker: broker)
        try await cluster.startServer()
        try await cluster.startDaemon(.direct)
        let monitor = LinkMonitor(socketPath: cluster.socketPath)
        monitor.start()
        let sample = await monitor.waitConnected(after: cluster.daemonStartedMS, seconds: 30)
        monitor.stop()
        await cluster.killDaemon()
        await cluster.stopUpstream()
        return sample?.connectedSinceMS.map { $0 - cluster.daemonStartedMS }
    }

    private func makeDirectory() throws -> String {
        try makeTemporaryDirectory(prefix: "imagent-chaos-\(getpid())")
    }

    private func printTails(directory: String, report: ChaosReport) {
        let server = upstream == .mqtt ? "\(broker.rawValue).log" : "refserver.log"
        var text = "\n== logs (tails)\n-- imagentd.log\n\(tail(directory + "/imagentd.log"))\n-- \(server)\n\(tail(directory + "/" + server))\n"
        if upstream == .mqtt { text += "-- echo.log\n\(tail(directory + "/echo.log", bytes: 1000))\n" }
        for failed in report.failedLoadgens.prefix(3) {
            let ending = failed.signaled ? "killed by signal \(failed.status)" : "exit status \(failed.status)"
            text += "-- loadgen \(failed.tag) (\(ending)): \(failed.json)\n\(tail(failed.errPath, bytes: 1500))\n"
        }
        FileHandle.standardError.write(Data(text.utf8))
    }
}
