import IMAgentTestKit
import Testing

@testable import IMAgentCore

/// A machine whose configuration also lists `redirect_allow` patterns.
func makeRedirectMachine(endpoints: [String], redirectAllow: [String], tls: Bool = false) -> Machine {
    var configuration = Machine.Configuration(endpoints: endpoints.map { Endpoint(parsing: $0)! }, tls: tls)
    configuration.redirectAllow = redirectAllow
    return Machine(configuration: configuration, random: SplitMix64(seed: 1))
}

/// GOAWAY REDIRECT leads only where the operator trusts the token to go
/// (finding 3 of the trust-boundaries review).
@Suite struct RedirectTrustTests {
    let a = Endpoint(host: "a.example", port: 7000)

    /// Runs a connected machine into GOAWAY REDIRECT `target`; returns where its next attempt goes.
    private func nextTarget(after target: String, endpoints: [String] = ["a.example:7000", "b.example:7000"],
                            allow: [String] = []) -> (Endpoint?, String) {
        var machine = makeRedirectMachine(endpoints: endpoints, redirectAllow: allow)
        let attempt = connectedMachine(&machine, now: at(0))
        let goaway = machine.goaway(attempt, code: .shutdown, retryAfter: nil, redirect: Endpoint(parsing: target)!, now: at(1))
        let reason = goaway.compactMap { action -> String? in
            if case .stateChanged(_, _, let reason) = action { return reason }
            return nil
        }.joined()
        var next = machine.connectionClosed(attempt, reason: "closed by us", now: at(1))
        // A GOAWAY without RETRY_AFTER_MS is followed after the floor (1–2 s), never at once.
        if let floor = next.armedTimer { next = machine.backoffElapsed(floor.id, now: floor.deadline) }
        guard case .connecting(_, let endpoint)? = next.enteredPhase else { return (nil, reason) }
        return (endpoint, reason)
    }

    @Test func aRedirectToAnUnconfiguredHost_isIgnored_andTheConfiguredEndpointsAreUsed() {
        let (target, reason) = nextTarget(after: "evil.example:7000")
        #expect(target == a)
        #expect(reason.contains("REDIRECT to evil.example:7000 ignored"), "\(reason)")
    }

    @Test func aRedirectToAConfiguredEndpoint_isFollowed() {
        let (target, _) = nextTarget(after: "B.example:7000")
        #expect(target == Endpoint(host: "B.example", port: 7000))
    }

    @Test func aRedirectToAnAllowedHost_isFollowed_andOnlyThere() {
        #expect(nextTarget(after: "im3.example.net:7443", allow: ["*.example.net"]).0 == Endpoint(host: "im3.example.net", port: 7443))
        #expect(nextTarget(after: "example.net:7443", allow: ["*.example.net"]).0 == a, "the pattern takes subdomains, not the domain")
        #expect(nextTarget(after: "im3.example.net.evil:7443", allow: ["*.example.net"]).0 == a)
        #expect(nextTarget(after: "10.0.0.5:7443", allow: ["10.0.0.5:7000"]).0 == a, "a pattern with a port holds to it")
        #expect(nextTarget(after: "10.0.0.5:7000", allow: ["10.0.0.5:7000"]).0 == Endpoint(host: "10.0.0.5", port: 7000))
        #expect(nextTarget(after: "[2001:db8::7]:7443", allow: ["[2001:db8::7]"]).0 == Endpoint(host: "2001:db8::7", port: 7443))
    }

    @Test func aRedirectBeforeLoginOK_isNeverFollowed_evenToAnAllowedHost() {
        var machine = makeRedirectMachine(endpoints: ["a.example:7000"], redirectAllow: ["*.example"])
        let attempt = machine.start(now: at(0)).startedAttempt!
        _ = machine.tokenObtained(attempt, now: at(0))
        _ = machine.resolved(attempt, addresses: addresses, now: at(0))
        _ = machine.tcpConnected(attempt, now: at(0))
        _ = machine.helloOK(attempt, hello, now: at(0))
        // In the login stage: the server has the LOGIN but has not accepted it.
        let goaway = machine.goaway(attempt, code: .shutdown, retryAfter: nil, redirect: Endpoint(parsing: "b.example:7000")!, now: at(1))
        let next = goaway + machine.connectionClosed(attempt, reason: "closed", now: at(1))
        let targets = next.compactMap { action -> Endpoint? in
            if case .stateChanged(_, .connecting(_, let endpoint), _) = action { return endpoint }
            return nil
        }
        #expect(!targets.contains(Endpoint(host: "b.example", port: 7000)), "\(next)")
    }

    @Test func patterns_areCheckedWhenTheFileIsRead() {
        #expect(RedirectPolicy.patternProblem("*.example.net") == nil)
        #expect(RedirectPolicy.patternProblem("im.example.net:7443") == nil)
        #expect(RedirectPolicy.patternProblem("*") != nil)
        #expect(RedirectPolicy.patternProblem("a.*.net") != nil)
        #expect(throws: ConfigProblems.self) { try ConfigLoader.load(text: "[server]\nredirect_allow = [\"*\"]", file: "f") }
        let c = try? ConfigLoader.load(text: "[server]\nredirect_allow = [\"*.example.net\"]", file: "f")
        #expect(c?.server.redirectAllow == ["*.example.net"])
        #expect(LinkConfiguration(c ?? DaemonConfiguration()).redirectAllow == ["*.example.net"])
    }
}

@Suite struct RedirectTLSNameTests {
    @Test func aRedirectTarget_isVerifiedForItsOwnName_neverTheConfiguredServerName() throws {
        let configured = Endpoint(host: "10.0.0.1", port: 7443)
        let tls = try LinkTLS(LinkConfiguration.TLS(enabled: true, serverName: "im.example.net"), endpoints: [configured])
        #expect(tls.serverName(for: configured) == "im.example.net")
        #expect(tls.serverName(for: Endpoint(host: "im3.example.net", port: 7443)) == "im3.example.net")
        #expect(tls.serverName(for: Endpoint(host: "10.0.0.9", port: 7443)) == nil, "an IP literal is verified against the address")
    }
}
