import Foundation
import IMAgentTestKit

/// Two network namespaces joined by a veth pair (the kit's `VethFixture`), named
/// after this process so concurrent runs never collide:
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
    let veth: VethFixture

    /// Always set: the chaos agent has a namespace of its own.
    var agentNamespace: String { veth.agentNamespace! }
    var serverNamespace: String { veth.serverNamespace }
    var agentLink: String { veth.agentLink }
    var serverLink: String { veth.serverLink }
    var agentAddress: String { veth.agentAddress }
    var serverAddress: String { veth.serverAddress }

    init(pid: Int32 = getpid()) {
        veth = VethFixture(name: "imchaos", linkPrefix: "ic", octet: 232, agentInNamespace: true, pid: pid)
    }

    /// Why namespaces cannot work here, or nil.
    static func unavailableReason() -> String? {
        VethFixture.unavailableReason(tools: ["ip", "nft", "tc"])
    }

    /// Removes namespaces left by runs that were killed with -9 (their pid no longer exists).
    static func removeStale() {
        for name in VethFixture.removeStale(name: "imchaos") {
            Log.line("removed \(name), left by a run that no longer exists")
        }
    }

    func create() throws {
        Children.shared.onCleanup("namespaces") { [self] in tearDown() }
        try veth.create()
    }

    /// Kills whatever still runs inside the namespaces, then deletes them (the veth pair goes with them).
    func tearDown() { veth.tearDown() }

    // MARK: Faults

    /// Drops `percent` % of packets at random on the server's veth, both ways (0 removes the rule).
    @discardableResult
    func setLoss(percent: Int) -> Bool { veth.setLoss(percent: percent) }

    /// Every packet on the veth dropped, both ways.
    @discardableResult
    func partition() -> Bool { veth.cut() }

    func clearFilter() { veth.restore() }

    /// `ip link set … down|up` on the agent's end (the daemon's network watcher sees it) or the server's.
    @discardableResult
    func setLink(agentSide: Bool, up: Bool) -> Bool { veth.setLink(agentSide: agentSide, up: up) }

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
}
