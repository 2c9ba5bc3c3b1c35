import Foundation

/// What one step of the schedule did and how the link came back.
struct PhaseRecord: Sendable {
    var name: String
    var startMS: Int64
    /// When the step (including waiting for the link to come back) was over.
    var endMS: Int64
    var recoveries: [Recovery] = []
    var notes: [String] = []
}

/// Applies each fault of the schedule to the topology and the processes,
/// ends it, and measures how the link came back.
struct FaultDirector {
    let topology: Topology
    let cluster: Cluster
    let fleet: LoadFleet
    let monitor: LinkMonitor
    let seed: UInt64

    func run(_ fault: Fault) async throws -> PhaseRecord {
        let name = if case .serverKill = fault, let mqtt = cluster.mqtt { "\(mqtt.name) SIGTERM + restart" } else { fault.name }
        var record = PhaseRecord(name: name, startMS: wallMS(), endMS: 0)
        Log.line("phase: \(name)")
        switch fault {
        case .clean(let seconds):
            try await sleep(seconds)
        case .loss(let percent, let seconds):
            record.recoveries.append(try await networkFault(fault.name) {
                guard topology.setLoss(percent: percent) else { throw ChaosError("nft loss rule failed") }
                try await sleep(seconds)
                topology.clearFilter()
            })
        case .partition(let seconds):
            record.recoveries.append(try await networkFault(fault.name) {
                guard topology.partition() else { throw ChaosError("nft partition rule failed") }
                try await sleep(seconds)
                topology.clearFilter()
            })
        case .flaps(let count, let down):
            for flap in 0..<count {
                let agentSide = flap % 2 == 0
                let name = "flap \(flap + 1): \(agentSide ? "agent" : "server")'s veth down \(format(down)) s, up"
                record.recoveries.append(try await networkFault(name) {
                    guard topology.setLink(agentSide: agentSide, up: false) else { throw ChaosError("ip link down failed") }
                    try await sleep(down)
                    guard topology.setLink(agentSide: agentSide, up: true) else { throw ChaosError("ip link up failed") }
                })
                try await sleep(1)
            }
        case .thinPipe(let rate, let seconds):
            record.recoveries.append(try await networkFault(fault.name) {
                guard topology.setThinPipe(rateKbit: rate) else { throw ChaosError("tc tbf failed") }
                try await sleep(seconds)
                topology.setThinPipe(rateKbit: nil)
            })
        case .serverKill:
            let start = wallMS()
            let before = monitor.latest?.reconnects
            await cluster.killServer()
            // The server stays down until the daemon has seen it go, so the restart is measured from a link that is down.
            if let down = await monitor.waitNotConnected(after: start, seconds: 10) {
                record.notes.append("the daemon saw the server gone after \(down.atMS - start) ms")
            } else {
                record.notes.append("the daemon did not see the server gone within 10 s")
            }
            try await cluster.startServer()
            let back = cluster.mqtt.map { "\($0.name) back (SIGTERM before; same port, persistence)" } ?? "refserver back (same port, --state)"
            record.recoveries.append(await Recovery.measure(back, monitor: monitor,
                                                            startMS: start, endMS: wallMS(), reconnectsBefore: before))
        case .backendKill:
            guard let mqtt = cluster.mqtt else { throw ChaosError("no echo backend to kill: the upstream is not MQTT") }
            try await mqtt.killAndRestartBackend()
            record.notes.append("echo backend kill -9, subscribed again (same client id)")
        case .daemonKill:
            record.recoveries.append(try await restartDaemon(onto: .direct, "imagentd started again (kill -9 before)"))
        case .delay(let range, let seconds):
            try await cluster.startProxy(delays: range, seed: seed)
            record.recoveries.append(try await restartDaemon(onto: .proxied, "imagentd started again behind the delay proxy"))
            try await sleep(seconds)
            record.recoveries.append(try await restartDaemon(onto: .direct, "imagentd started again, direct"))
            await cluster.stopProxy()
        case .clientKill:
            if let what = await fleet.killAndRestartNewest() {
                record.notes.append(what)
            } else {
                record.notes.append("no loadgen to kill (all were finishing)")
            }
            try await sleep(2)
        }
        record.endMS = wallMS()
        for recovery in record.recoveries { Log.line("  \(recovery.fault): \(recovery.text)") }
        return record
    }

    /// Runs `apply` (which starts and ends the fault), then waits for the link.
    private func networkFault(_ name: String, _ apply: () async throws -> Void) async throws -> Recovery {
        let before = monitor.latest?.reconnects
        let start = wallMS()
        try await apply()
        return await Recovery.measure(name, monitor: monitor, startMS: start, endMS: wallMS(), reconnectsBefore: before)
    }

    /// `kill -9` the daemon and start it on `route`; the time counts from the new process's start.
    private func restartDaemon(onto route: Cluster.Route, _ name: String) async throws -> Recovery {
        let start = wallMS()
        await cluster.killDaemon()
        try await cluster.startDaemon(route)
        return await Recovery.measure(name, monitor: monitor, startMS: start, endMS: cluster.daemonStartedMS,
                                      reconnectsBefore: nil)
    }

    private func sleep(_ seconds: Double) async throws {
        try await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
    }
}
