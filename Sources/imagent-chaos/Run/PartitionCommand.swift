import ArgumentParser
import Foundation

/// `imagent-chaos partition`: issue 12's measurement. The daemon with the
/// packaged [heartbeat] and [reconnect] defaults in one namespace, the
/// reference server in another, one session echoing a message every 200 ms;
/// nftables drops everything for each partition in turn, then lets it
/// through again. For each heal: the time to the first echo that arrives
/// after it. The run passes when the p95 of those is within 2 s and the
/// loadgen saw every message exactly once, in order.
struct PartitionCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "partition",
        abstract: "Silent partitions with the packaged defaults: time from the heal to the first echo, and every message once, in order.",
        discussion: """
            The CI size (default): partitions of 15 s and 60 s, once each, about 2 minutes. --long: 5, 15, 30, 60 \
            and 300 s, three times each, about 30 minutes. Prints a readable report on stderr and one JSON line on \
            stdout; exit 0 only when the p95 of heal → first echo is within --bound-ms and nothing was lost, \
            duplicated or reordered. Without root it says why and exits 0: skipped.
            """)

    @Option(help: ArgumentHelp("Partition lengths in seconds, comma-separated.", valueName: "s,s,…"))
    var seconds: String = "15,60"

    @Option(help: "How many times to run each partition length.")
    var runs = 1

    @Flag(help: "5, 15, 30, 60 and 300 s, three times each (overrides --seconds and --runs).")
    var long = false

    @Option(name: .customLong("bound-ms"), help: "The bound on the p95 of heal → first echo.")
    var boundMS = 2000

    @Flag(help: "Keep the run directory (logs, store, loadgen report) instead of removing it.")
    var keep = false

    var partitions: [Double] {
        let lengths = long ? [5.0, 15, 30, 60, 300] : seconds.split(separator: ",").compactMap { Double($0) }
        let repeats = long ? 3 : runs
        return (0..<repeats).flatMap { _ in lengths }
    }

    func validate() throws {
        guard !partitions.isEmpty, partitions.allSatisfy({ $0 > 0 }) else {
            throw ValidationError("--seconds needs positive numbers, e.g. 15,60")
        }
        guard runs >= 1 else { throw ValidationError("--runs must be at least 1") }
    }

    func run() async throws {
        let plan = partitions
        try await ScenarioRunner.run("imagent-chaos partition",
                                     timeLimitSeconds: { plan.reduce(0) { $0 + $1 + PartitionRun.settleSeconds } + 180 }) {
            try await PartitionRun(partitions: plan, boundMS: boundMS, keepDirectory: keep).run()
        }
    }
}
