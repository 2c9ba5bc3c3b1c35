import Foundation
import IMAgentTestKit
import IMLink
import Testing
@testable import IMAgentCore

/// The reference server binary in a network namespace of its own, joined to
/// this (root) namespace by a veth pair with a /30 in 10.231.0.0/16 that the
/// test creates and removes: link cuts with nftables (100 % loss), and link
/// flaps with `ip link` seen by the network watcher.
///
/// Only addresses this test creates are ever used. A blackhole-like
/// `unreachable` route for the /30 (metric 9999, under the connected route)
/// keeps packets for the test address from ever leaving through a default
/// route while the veth is down; it also makes "no route" visible to the
/// watcher in that case.
@Suite("Link through a network namespace", .serialized, .timeLimit(.minutes(2)))
struct NetworkNamespaceTests {
    static let refserverBinary: String? = {
        if let path = ProcessInfo.processInfo.environment["IMAGENT_REFSERVER"] { return path }
        var root = URL(fileURLWithPath: #filePath)
        for _ in 0..<4 { root.deleteLastPathComponent() }
        for candidate in [".build/debug/imagent-refserver", ".build/x86_64-unknown-linux-gnu/debug/imagent-refserver"] {
            let path = root.appendingPathComponent(candidate).path
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return nil
    }()

    /// Why the test cannot run here, or nil.
    static let unavailableReason: String? = {
        if let reason = VethFixture.unavailableReason(tools: ["ip", "nft"]) { return reason }
        guard refserverBinary != nil else { return "imagent-refserver is not built (swift build --product imagent-refserver)" }
        return nil
    }()

    @Test(.enabled(if: unavailableReason == nil, "root, ip netns, nft and the refserver binary"))
    func survivesCutsAndFlaps() async throws {
        if let reason = Self.unavailableReason { print("skipping the namespace test: \(reason)") }
        try await withServerInNamespace("netns") { topology, tokens, port in
            var configuration = testLinkConfiguration(endpoints: ["\(topology.serverAddress):\(port)"], tokenFile: tokens)
            configuration.watchNetwork = true
            configuration.stageTimeout = .seconds(2)
            let (engine, recorder) = try startEngine(configuration)
            try await recorder.waitFor(timeout: 10, "LOGIN_OK across the veth") { $0.isConnected }
            let interval = await engine.status().heartbeatInterval

            // 1. Cut: every packet dropped in the server's namespace.
            var mark = recorder.count
            try #require(topology.cut(), "nft rule")
            let cutAt = nowSeconds()
            let dead = try await recorder.waitFor(after: mark, timeout: 20, "heartbeat death") { $0.leftConnected }
            let detection = dead.at - cutAt
            print("netns cut (100 % loss): link declared dead after \(String(format: "%.2f", detection)) s "
                + "(interval \(interval.map { "\($0)" } ?? "-") + 2 PONG deadlines of 3 s) — \(dead.transition.reason)")
            #expect(detection <= 2.2 + 6 + 1)

            // 2. Restore: the engine is retrying on its own (no network event).
            try await Task.sleep(for: .seconds(1))
            mark = recorder.count
            try #require(topology.restore(), "nft delete")
            let restoredAt = nowSeconds()
            let back = try await recorder.waitFor(after: mark, timeout: 15, "LOGIN_OK after restore") { $0.isConnected }
            // Split the figure, so that a slow one says whether the probe timing
            // (≤ ~1.1 s: a probe's resent SYN, or the next probe 50–100 ms after
            // a 1 s one) or the handshake on a loaded machine took the time.
            let tcpUp = recorder.all.dropFirst(mark).first {
                $0.at >= restoredAt && { if case .connecting(.hello, _) = $0.to { true } else { false } }($0.transition)
            }
            print("netns restore → LOGIN_OK in \(String(format: "%.0f", (back.at - restoredAt) * 1000)) ms "
                + "(TCP up after \(tcpUp.map { String(format: "%.0f", ($0.at - restoredAt) * 1000) } ?? "-") ms; "
                + "probing the silent path, no watcher event)")
            #expect(back.at - restoredAt < 3, "a probe is in flight: the next SYN leaves within about 1 s of the restore")

            // 3. Flap: the agent-side veth goes down; the watcher sees the route go.
            mark = recorder.count
            try #require(topology.setHostLink(up: false), "ip link down")
            let downAt = nowSeconds()
            let waiting = try await recorder.waitFor(after: mark, timeout: 5, "waiting for network") {
                if case .waitingForNetwork = $0.to { true } else { false }
            }
            print("veth down → link dropped, waiting for network after \(String(format: "%.0f", (waiting.at - downAt) * 1000)) ms")
            try await Task.sleep(for: .seconds(2))
            #expect(!recorder.all.dropFirst(mark).contains { $0.transition.isAttemptStart }, "no attempts without a route")
            mark = recorder.count
            try #require(topology.setHostLink(up: true), "ip link up")
            let upAt = nowSeconds()
            let relinked = try await recorder.waitFor(after: mark, timeout: 10, "LOGIN_OK after the flap") { $0.isConnected }
            let flapFigure = relinked.at - upAt
            print("veth up → LOGIN_OK in \(String(format: "%.0f", flapFigure * 1000)) ms (network watcher)")
            #expect(flapFigure < 5.0, "the watcher brings the link back (about 0.1 s on an idle machine; the figure is printed)")
            await engine.shutdown()

            // 4. Cut while a frame waits for its answer, on a link whose heartbeat
            //    is a minute away: the overdue reply, not the interval, finds it.
            configuration.heartbeatMin = .seconds(60)
            configuration.heartbeatMax = .seconds(120)
            configuration.watchNetwork = false
            let (quiet, quietRecorder) = try startEngine(configuration)
            try await quietRecorder.waitFor(timeout: 10, "LOGIN_OK with a 60 s heartbeat") { $0.isConnected }
            mark = quietRecorder.count
            try #require(topology.cut(), "nft rule")
            let sentAt = nowSeconds()
            let sent = try await quiet.eventLoop.submit {
                quiet.send(.open(Open(session: 7, service: "echo", resumeAfter: 0)))
            }.get()
            #expect(sent)
            let found = try await quietRecorder.waitFor(after: mark, timeout: 20, "death by overdue reply") { $0.leftConnected }
            let overdueFigure = found.at - sentAt
            print("netns cut with a frame awaiting its reply (heartbeat 60 s): link declared dead after "
                + "\(String(format: "%.2f", overdueFigure)) s (ACK deadline ≥ 1 s + 2 PONG deadlines of 3 s) — \(found.transition.reason)")
            #expect(overdueFigure <= 1 + 6 + 2)
            await quiet.shutdown()
        }
    }

    /// A cut shorter than the heartbeat's death detection (about 7 s): the
    /// old connection would wait for TCP's next retransmission (about 6.2 s
    /// after the first lost segment, so 2.2 s after a 4 s cut). The probe
    /// beside the suspected link gets through within about 1.1 s of the
    /// restore and the link is replaced.
    @Test(.enabled(if: unavailableReason == nil, "root, ip netns, nft and the refserver binary"))
    func aShortCut_isHealedThroughTheProbe_notTCPsRetransmission() async throws {
        try await withServerInNamespace("netns-probe") { topology, tokens, port in
            var configuration = testLinkConfiguration(endpoints: ["\(topology.serverAddress):\(port)"], tokenFile: tokens)
            configuration.heartbeatMin = .seconds(60)
            configuration.heartbeatMax = .seconds(120)
            let (engine, recorder) = try startEngine(configuration)
            try await recorder.waitFor(timeout: 10, "LOGIN_OK across the veth") { $0.isConnected }

            let mark = recorder.count
            try #require(topology.cut(), "nft rule")
            let sent = try await engine.eventLoop.submit {
                engine.send(.open(Open(session: 7, service: "echo", resumeAfter: 0)))
            }.get()
            #expect(sent)
            try await Task.sleep(for: .seconds(4))
            #expect(!recorder.all.dropFirst(mark).contains { $0.transition.leftConnected }, "4 s is shorter than death detection")
            try #require(topology.restore(), "nft delete")
            let restoredAt = nowSeconds()
            let replaced = try await recorder.waitFor(after: mark, timeout: 10, "the link replaced") { $0.leftConnected }
            let back = try await recorder.waitFor(after: mark, timeout: 10, "LOGIN_OK on the new connection") { $0.isConnected }
            print("netns 4 s cut with a frame owed → link replaced \(String(format: "%.0f", (replaced.at - restoredAt) * 1000)) ms, "
                + "LOGIN_OK \(String(format: "%.0f", (back.at - restoredAt) * 1000)) ms after the restore — \(replaced.transition.reason)")
            #expect(replaced.transition.reason.contains("path back"), "\(replaced.transition.reason)")
            // A probe's SYN within ~1.1 s of the restore, then TCP, HELLO and LOGIN on a veth;
            // the rest is allowance for a loaded machine (TCP's own retransmission would be at ~2.2 s).
            #expect(back.at - restoredAt < 1.1 + 0.9)
            await engine.shutdown()
        }
    }

    /// A run killed with -9 leaves its namespaces behind; the next set-up removes those of its
    /// name whose pid is gone, never one of a live process or of another name.
    @Test(.enabled(if: unavailableReason == nil, "root, ip netns, nft and the refserver binary"))
    func setUpRemovesTheNamespacesOfKilledRuns() throws {
        let exited = try ChildProcess(executable: "/bin/true")
        exited.waitUntilExit()
        let gone = exited.processIdentifier
        let stale = ["imstale-s-\(gone)", "imstale-a-\(gone)"]
        let kept = ["imstale-s-\(getpid())", "imstalex-s-\(gone)"]
        defer { for namespace in stale + kept { runShell("ip netns del \(namespace)") } }
        for namespace in stale + kept {
            try #require(runShell("ip netns add \(namespace)").succeeded, "ip netns add \(namespace)")
        }

        #expect(VethFixture.removeStale(name: "imstale").sorted() == stale.sorted())
        let left = Set(VethFixture.namespaces())
        #expect(left.isDisjoint(with: stale))
        #expect(left.isSuperset(of: kept))
    }

    /// The reference server in a namespace of its own behind a fresh veth,
    /// accepting one token; `body` gets the veth, the token file and the
    /// server's port. The server, the files and the veth go afterwards.
    func withServerInNamespace(
        _ label: String,
        _ body: (NamespaceTopology, _ tokens: String, _ port: Int) async throws -> Void
    ) async throws {
        let topology = try NamespaceTopology()
        defer { topology.tearDown() }
        let scratch = try ScratchDirectory(label)
        defer { scratch.cleanup() }
        let tokens = try scratch.write("tokens", "secret-ns\n")
        let server = try await RefServerHandle.start(
            host: topology.serverAddress, arguments: ["--token-file", tokens],
            outPath: scratch.path + "/refserver.out", logPath: scratch.path + "/refserver.log",
            namespace: topology.namespace, binary: try #require(Self.refserverBinary))
        defer {
            server.process.terminate()
            server.process.waitUntilExit()
        }
        try await body(topology, tokens, server.port)
    }
}

/// The test's fixture (the kit's): the server in a namespace of its own, the engine in this (root) one.
typealias NamespaceTopology = VethFixture

extension VethFixture {
    /// Created at once; `tearDown()` removes it whatever state the test left it in.
    convenience init() throws {
        self.init(name: "imtest", linkPrefix: "imt", octet: 231, agentInNamespace: false)
        try create()
    }

    var namespace: String { serverNamespace }

    func setHostLink(up: Bool) -> Bool { setLink(agentSide: true, up: up) }
}
