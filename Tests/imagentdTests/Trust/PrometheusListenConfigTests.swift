import Testing

@testable import IMAgentCore

/// `[metrics] prometheus_listen` has no authentication: an address off loopback is a
/// configuration error unless `prometheus_allow_remote = true` says so, and then a warning.
@Suite struct PrometheusListenConfigTests {
    private func load(_ metrics: String) throws(ConfigProblems) -> DaemonConfiguration {
        try ConfigLoader.load(text: "[server]\nendpoints = [\"127.0.0.1:7443\"]\n[metrics]\n" + metrics, file: "f")
    }

    @Test(arguments: ["0.0.0.0:9464", "192.0.2.1:9464", "[::]:9464", "[2001:db8::1]:9464", "metrics.example.net:9464"])
    func anAddressOffLoopback_isALineProblem(listen: String) {
        do {
            _ = try load("\n\nprometheus_listen = \"\(listen)\"\n")
            Issue.record("\(listen) was accepted")
        } catch {
            #expect(error.problems.count == 1)
            #expect(error.problems.first?.line == 6, "\(error)")
            #expect(error.description.contains("\"\(listen)\" is not a loopback address"), "\(error)")
            #expect(error.description.contains("prometheus_allow_remote = true"), "\(error)")
        }
    }

    @Test func theAllowKey_acceptsIt_andStartWarns() throws {
        let c = try load("prometheus_listen = \"0.0.0.0:9464\"\nprometheus_allow_remote = true\n")
        #expect(c.prometheusListen == "0.0.0.0:9464" && c.prometheusAllowRemote)
        #expect(SecurityWarnings.of(c).contains { $0.contains("prometheus_allow_remote = true") && $0.contains("0.0.0.0:9464") },
                "\(SecurityWarnings.of(c))")
    }

    @Test(arguments: ["127.0.0.1:9464", "127.1.2.3:9464", "[::1]:9464", "localhost:9464"])
    func loopback_needsNoConsent_andNoWarning(listen: String) throws {
        let c = try load("prometheus_listen = \"\(listen)\"\n")
        #expect(c.prometheusListen == listen && !c.prometheusAllowRemote)
        #expect(!SecurityWarnings.of(c).contains { $0.contains("prometheus") })
    }

    @Test func theAllowKey_isABoolean() {
        #expect(throws: ConfigProblems.self) { try load("prometheus_allow_remote = \"yes\"\n") }
    }

    @Test func aReload_leavesTheAllowKeyToTheNextStart() throws {
        let running = try load("prometheus_listen = \"127.0.0.1:9464\"\n")
        let fresh = try load("prometheus_listen = \"127.0.0.1:9464\"\nprometheus_allow_remote = true\n")
        #expect(ReloadPlan(from: running, to: fresh).needsRestart == ["metrics.prometheus_allow_remote"])
    }
}
