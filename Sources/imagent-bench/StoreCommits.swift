import AgentIPC

/// imagentd's store counters from METRICS (as an admin): SENDs accepted and store transactions
/// committed since it started. Their deltas over a one-way run give the payloads per commit: at
/// `power`, the payloads that share one segment fdatasync and one WAL fsync (a commit holding
/// only ACKed deletions counts too, as it costs its fsync all the same).
struct StoreCommits: Hashable, Sendable {
    var accepted: Int
    var commits: Int

    /// From METRICS' JSON: `counters.messages_accepted_total` and `histograms.store_commit_operations.count`.
    init?(metrics json: String) {
        guard let accepted = Self.integer(after: ["\"messages_accepted_total\""], in: json),
              let commits = Self.integer(after: ["\"store_commit_operations\"", "\"count\""], in: json) else { return nil }
        (self.accepted, self.commits) = (accepted, commits)
    }

    init(accepted: Int, commits: Int) { (self.accepted, self.commits) = (accepted, commits) }

    /// The daemon's counters now; nil if METRICS cannot be had or lacks them.
    static func read(socketPath: String) async -> StoreCommits? {
        guard let client = try? await IPCClient.connect(socketPath: socketPath, clientName: "imagent-bench-metrics") else { return nil }
        let json = try? await client.metrics()
        await client.close()
        return json.flatMap { StoreCommits(metrics: $0) }
    }

    /// Payloads accepted per commit since `earlier`; nil without a commit in between.
    func payloadsPerCommit(since earlier: StoreCommits) -> Double? {
        let commits = self.commits - earlier.commits
        return commits > 0 ? Double(accepted - earlier.accepted) / Double(commits) : nil
    }

    /// The integer after the last of `keys`, each found after the one before it.
    private static func integer(after keys: [String], in json: String) -> Int? {
        var rest = Substring(json)
        for key in keys {
            guard let found = rest.firstRange(of: key) else { return nil }
            rest = rest[found.upperBound...]
        }
        let digits = rest.drop { $0 == ":" || $0 == " " }.prefix { $0.isNumber }
        return Int(digits)
    }
}
