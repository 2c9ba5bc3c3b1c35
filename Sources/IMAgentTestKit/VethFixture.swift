#if canImport(Glibc)
import Glibc
#endif

/// The network-namespace fixture of the namespace tests and the chaos suite:
/// the reference server's own namespace, joined by a veth pair to the agent's
/// side — a namespace of its own, or this (root) namespace — with a /30 out of
/// 10.OCTET.0.0/16 and names derived from this process's pid, so that
/// concurrent runs never collide:
///
/// ```
///   agent side (NAME-a-PID, or the root namespace)    server namespace NAME-s-PID
///   PREFIXaPID 10.OCTET.X.Y+1/30  <──── veth ────>    PREFIXsPID 10.OCTET.X.Y+2/30
/// ```
///
/// Faults: nftables in the server's namespace (random drops on its veth both
/// ways, or all of them: a cut) and `ip link` down/up of either end. Only the
/// addresses it creates are ever used; with the agent in the root namespace an
/// `unreachable` route for the /30 (metric 9999, under the connected route)
/// keeps packets for it from leaving by a default route while the veth is down.
public final class VethFixture: @unchecked Sendable {
    public let serverNamespace: String
    /// Nil: the agent's end is in this (root) namespace.
    public let agentNamespace: String?
    public let agentLink: String
    public let serverLink: String
    public let agentAddress: String
    public let serverAddress: String
    public let subnet: String
    /// The namespaces' prefix, also the name of the nftables table of the faults.
    private let name: String

    public init(name: String, linkPrefix: String, octet: Int, agentInNamespace: Bool, pid: Int32 = getpid()) {
        serverNamespace = "\(name)-s-\(pid)"
        agentNamespace = agentInNamespace ? "\(name)-a-\(pid)" : nil
        agentLink = "\(linkPrefix)a\(pid % 10_000_000)"
        serverLink = "\(linkPrefix)s\(pid % 10_000_000)"
        let third = (Int(pid) / 64) % 256
        let base = (Int(pid) % 64) * 4
        subnet = "10.\(octet).\(third).\(base)/30"
        agentAddress = "10.\(octet).\(third).\(base + 1)"
        serverAddress = "10.\(octet).\(third).\(base + 2)"
        self.name = name
    }

    /// Why namespaces cannot work here (not root, a tool missing, no CAP_NET_ADMIN), or nil.
    public static func unavailableReason(tools: [String] = ["ip", "nft"]) -> String? {
        guard getuid() == 0 else { return "needs root (\(tools.joined(separator: ", ")))" }
        for tool in tools where !runShell("command -v \(tool)").succeeded {
            return "\(tool) is not installed (scripts/bootstrap installs iproute2 and nftables)"
        }
        let probe = "improbe-\(getpid())"
        defer { runShell("ip netns del \(probe)") }
        guard runShell("ip netns add \(probe) && ip netns exec \(probe) nft list tables").succeeded else {
            return "ip netns or nft does not work here (a container without CAP_NET_ADMIN?)"
        }
        return nil
    }

    /// Removes the namespaces `NAME-a-PID` and `NAME-s-PID` of runs killed before their
    /// tear-down (no process PID any more), with whatever still runs in them; their veth pairs
    /// and rules go with them. Returns the names removed.
    @discardableResult
    public static func removeStale(name: String) -> [String] {
        var removed: [String] = []
        for namespace in namespaces() where namespace.hasPrefix("\(name)-") {
            let parts = namespace.split(separator: "-")
            guard parts.count == 3, parts[1] == "a" || parts[1] == "s", let pid = Int32(parts[2]),
                kill(pid, 0) != 0, errno == ESRCH
            else { continue }
            runShell("for p in $(ip netns pids \(namespace)); do kill -9 $p; done; ip netns del \(namespace)")
            removed.append(namespace)
        }
        return removed
    }

    /// The names `ip netns list` shows (each line's first word: the rest is an id, when there is one).
    public static func namespaces() -> [String] {
        runShell("ip netns list").output.split(separator: "\n").compactMap { $0.split(separator: " ").first.map(String.init) }
    }

    /// Creates the namespaces, the veth pair, the addresses (and the route); removes what it made if a step fails.
    /// Namespaces of this name left by killed runs are removed first, so a rerun heals itself.
    public func create() throws(ChildProcessError) {
        Self.removeStale(name: name)
        let agentIn = agentNamespace.map { " netns \($0)" } ?? ""
        let onAgent = agentNamespace.map { "-n \($0) " } ?? ""
        let setup = """
            set -e
            \(agentNamespace.map { "ip netns add \($0)" } ?? "ip route replace unreachable \(subnet) metric 9999")
            ip netns add \(serverNamespace)
            ip link add \(agentLink)\(agentIn) type veth peer name \(serverLink) netns \(serverNamespace)
            \(agentNamespace == nil ? "" : "ip -n \(agentNamespace!) link set lo up")
            ip -n \(serverNamespace) link set lo up
            ip \(onAgent)addr add \(agentAddress)/30 dev \(agentLink)
            ip -n \(serverNamespace) addr add \(serverAddress)/30 dev \(serverLink)
            ip \(onAgent)link set \(agentLink) up
            ip -n \(serverNamespace) link set \(serverLink) up
            """
        let result = runShell(setup)
        guard result.succeeded else {
            tearDown()
            throw ChildProcessError("could not create the namespaces and the veth pair: \(result.output)")
        }
    }

    /// Kills whatever still runs in its namespaces and removes everything, whatever state it is in.
    public func tearDown() {
        for namespace in [agentNamespace, serverNamespace].compactMap({ $0 }) {
            runShell("for p in $(ip netns pids \(namespace) 2>/dev/null); do kill -9 $p; done; ip netns del \(namespace)")
        }
        if agentNamespace == nil {
            runShell("ip link del \(agentLink)")
            runShell("ip route del unreachable \(subnet) metric 9999")
        }
    }

    // MARK: Faults

    /// Drops `percent` % of the packets on the server's veth at random, both ways (0 removes the rule).
    @discardableResult
    public func setLoss(percent: Int) -> Bool {
        restore()
        guard percent > 0 else { return true }
        let match = percent >= 100 ? "" : "numgen random mod 100 < \(percent) "
        let ruleset = """
            table inet \(name) {
              chain in { type filter hook input priority 0; policy accept; iifname "\(serverLink)" \(match)drop; }
              chain out { type filter hook output priority 0; policy accept; oifname "\(serverLink)" \(match)drop; }
            }
            """
        return runShell("printf '%s\\n' '\(ruleset)' | ip netns exec \(serverNamespace) nft -f -").succeeded
    }

    /// Every packet on the veth dropped, both ways: a silent partition.
    @discardableResult
    public func cut() -> Bool { setLoss(percent: 100) }

    /// Removes the drop rules; false when there were none.
    @discardableResult
    public func restore() -> Bool {
        runShell("ip netns exec \(serverNamespace) nft delete table inet \(name)").succeeded
    }

    /// `ip link set … down|up` on the agent's end (a network watcher there sees it) or the server's.
    @discardableResult
    public func setLink(agentSide: Bool, up: Bool) -> Bool {
        let (namespace, link) = agentSide ? (agentNamespace, agentLink) : (serverNamespace, serverLink)
        return runShell("ip \(namespace.map { "-n \($0) " } ?? "")link set \(link) \(up ? "up" : "down")").succeeded
    }
}
