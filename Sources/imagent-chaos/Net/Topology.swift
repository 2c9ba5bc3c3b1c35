import Foundation

/// Two network namespaces joined by a veth pair, named after this process so
/// concurrent runs never collide:
///
/// ```
///   namespace imchaos-a-PID (imagentd, delay proxy)   namespace imchaos-s-PID (imagent-refserver)
///   lo 127.0.0.1                                      lo 127.0.0.1
///   icaPID 10.232.X.Y+1/30  <──────── veth ────────>  icsPID 10.232.X.Y+2/30
/// ```
///
/// Faults: nftables in the server's namespace (random drops on its veth,
/// both ways, or everything for a partition), `ip link` down/up of either
/// end, and a token bucket (`tc … tbf`) on both ends for a thin pipe.
/// Deleting the namespaces removes the veth pair, the rules and the qdiscs.
final class Topology: @unchecked Sendable {
    let agentNamespace: String
    let serverNamespace: String
    let agentLink: String
    let serverLink: String
    let agentAddress: String
    let serverAddress: String

    private static let table = "imchaos"

    init(pid: Int32 = getpid()) {
        agentNamespace = "imchaos-a-\(pid)"
        serverNamespace = "imchaos-s-\(pid)"
        agentLink = "ica\(pid % 10_000_000)"
        serverLink = "ics\(pid % 10_000_000)"
        let third = (Int(pid) / 64) % 256
        let base = (Int(pid) % 64) * 4
        agentAddress = "10.232.\(third).\(base + 1)"
        serverAddress = "10.232.\(third).\(base + 2)"
    }

    /// Why namespaces cannot work here, or nil.
    static func unavailableReason() -> String? {
        guard getuid() == 0 else { return "needs root (ip netns, nft, tc)" }
        for tool in ["ip", "nft", "tc"] where !Shell.run("command -v \(tool)", quiet: true).succeeded {
            return "\(tool) is not installed (scripts/bootstrap installs iproute2 and nftables)"
        }
        let probe = "imchaos-probe-\(getpid())"
        defer { Shell.run("ip netns del \(probe)", quiet: true) }
        guard Shell.run("ip netns add \(probe) && ip netns exec \(probe) nft list tables", quiet: true).succeeded else {
            return "ip netns or nft does not work here (a container without CAP_NET_ADMIN?)"
        }
        return nil
    }

    /// Removes namespaces left by runs that were killed with -9 (their pid no longer exists).
    static func removeStale() {
        let names = Shell.run("ip netns list", quiet: true).output.split(separator: "\n").compactMap { $0.split(separator: " ").first }
        for name in names where name.hasPrefix("imchaos-") {
            guard let pid = Int32(name.split(separator: "-").last ?? ""), kill(pid, 0) != 0, errno == ESRCH else { continue }
            Log.line("removing \(name), left by a run that no longer exists")
            Shell.run("for p in $(ip netns pids \(name)); do kill -9 $p; done; ip netns del \(name)", quiet: true)
        }
    }

    func create() throws {
        Children.shared.onCleanup("namespaces") { [self] in tearDown() }
        let setup = """
            set -e
            ip netns add \(agentNamespace)
            ip netns add \(serverNamespace)
            ip link add \(agentLink) netns \(agentNamespace) type veth peer name \(serverLink) netns \(serverNamespace)
            ip -n \(agentNamespace) link set lo up
            ip -n \(serverNamespace) link set lo up
            ip -n \(agentNamespace) addr add \(agentAddress)/30 dev \(agentLink)
            ip -n \(serverNamespace) addr add \(serverAddress)/30 dev \(serverLink)
            ip -n \(agentNamespace) link set \(agentLink) up
            ip -n \(serverNamespace) link set \(serverLink) up
            """
        guard Shell.run(setup).succeeded else {
            tearDown()
            throw ChaosError("could not create the namespaces and veth pair")
        }
    }

    /// Kills whatever still runs inside the namespaces, then deletes them (the veth pair goes with them).
    func tearDown() {
        for namespace in [agentNamespace, serverNamespace] {
            Shell.run("for p in $(ip netns pids \(namespace) 2>/dev/null); do kill -9 $p; done; ip netns del \(namespace)",
                      quiet: true)
        }
    }

    // MARK: Faults

    /// Drops `percent` % of packets at random on the server's veth, both ways (0 removes the rule).
    @discardableResult
    func setLoss(percent: Int) -> Bool {
        clearFilter()
        guard percent > 0 else { return true }
        let match = percent >= 100 ? "" : "numgen random mod 100 < \(percent) "
        return nft("""
            table inet \(Self.table) {
              chain in { type filter hook input priority 0; policy accept; iifname "\(serverLink)" \(match)drop; }
              chain out { type filter hook output priority 0; policy accept; oifname "\(serverLink)" \(match)drop; }
            }
            """)
    }

    /// Every packet on the veth dropped, both ways.
    @discardableResult
    func partition() -> Bool { setLoss(percent: 100) }

    func clearFilter() {
        Shell.run("ip netns exec \(serverNamespace) nft delete table inet \(Self.table)", quiet: true)
    }

    /// `ip link set … down|up` on the agent's end (the daemon's network watcher sees it) or the server's.
    @discardableResult
    func setLink(agentSide: Bool, up: Bool) -> Bool {
        let (namespace, link) = agentSide ? (agentNamespace, agentLink) : (serverNamespace, serverLink)
        return Shell.run("ip -n \(namespace) link set \(link) \(up ? "up" : "down")").succeeded
    }

    /// A token bucket on both ends' egress; nil removes it.
    @discardableResult
    func setThinPipe(rateKbit: Int?) -> Bool {
        var ok = true
        for (namespace, link) in [(agentNamespace, agentLink), (serverNamespace, serverLink)] {
            if let rateKbit {
                ok = Shell.run("ip netns exec \(namespace) tc qdisc replace dev \(link) root tbf rate \(rateKbit)kbit burst 4kb latency 400ms").succeeded && ok
            } else {
                Shell.run("ip netns exec \(namespace) tc qdisc del dev \(link) root", quiet: true)
            }
        }
        return ok
    }

    private func nft(_ ruleset: String) -> Bool {
        Shell.run("printf '%s\\n' '\(ruleset)' | ip netns exec \(serverNamespace) nft -f -").succeeded
    }
}
