import Testing

@testable import IMAgentCore

/// The pure parts behind what an operator reads: the link's sentence, the
/// unconfigured state, what a reload applies, what `--check-config` checks.
@Suite struct OperatorStateTests {
    static let origin = MonotonicInstant(sinceOrigin: .seconds(3_000))

    @Test func backingOff_readsAsACountdownWithItsCause() {
        var status = LinkStatus(phase: .waitingToReconnect(until: Self.origin + .milliseconds(3_200)))
        status.lastError = "tcp: connect(descriptor:addr:size:): Connection refused (errno: 111)"
        #expect(status.sentence(now: Self.origin) == "reconnecting in 4 s (connection refused)")
        #expect(status.nextStep(now: Self.origin) == "next attempt in 4 s; `imagent connect` tries at once")
        // 01:00:00 UTC plus 3.2 s: the unit's line names the time, which does not go stale.
        #expect(status.systemdSentence(now: Self.origin, wallNowMS: 3_600_000)
            == "reconnecting at 01:00:03 UTC (connection refused)")
        let later = LinkStatus(phase: .waitingToReconnect(until: Self.origin + .seconds(95)))
        #expect(later.sentence(now: Self.origin) == "reconnecting in 1 min 35 s")
    }

    @Test func everyPhase_hasASentence() {
        let endpoint = Endpoint(parsing: "im.example.net:7443")!
        #expect(LinkStatus(phase: .connected(endpoint)).sentence(now: Self.origin) == "connected to im.example.net:7443")
        #expect(LinkStatus(phase: .connecting(.tls, endpoint)).sentence(now: Self.origin)
            == "connecting to im.example.net:7443 (TLS handshake)")
        #expect(LinkStatus(phase: .stopped(.userDisconnected)).sentence(now: Self.origin) == "disconnected by an administrator")
        #expect(LinkStatus(phase: .stopped(.userDisconnected)).nextStep(now: Self.origin) == "run `imagent connect` to bring the link up")
        #expect(LinkStatus(phase: .connected(endpoint)).nextStep(now: Self.origin) == nil)
        var lost = LinkStatus(phase: .waitingForNetwork)
        lost.lastError = "network down"
        #expect(lost.sentence(now: Self.origin) == "waiting for the network (network down)")
    }

    @Test func unconfigured_saysWhatIsMissingAndWhatToDo() {
        var configuration = DaemonConfiguration()
        configuration.token = .file("/nonexistent/token")
        let problem = LinkReadiness.problem(configuration, configPath: "/etc/imagent/imagentd.toml")
        #expect(problem == "no endpoints: set [server] endpoints = [\"host:port\"] in /etc/imagent/imagentd.toml; "
            + "no usable token: /nonexistent/token cannot be read (No such file or directory); write the token there ([auth] token_file)")
        let status = LinkStatus.unconfigured(problem!)
        #expect(status.state == "unconfigured")
        #expect(status.ipcLinkState == .disconnected)
        #expect(status.sentence(now: Self.origin).hasPrefix("unconfigured: no endpoints"))
        #expect(status.nextStep(now: Self.origin)?.contains("`imagent reload`") == true)

        configuration.server.endpoints = ["127.0.0.1:7443"]
        configuration.token = .credential("token")
        #expect(LinkReadiness.problem(configuration, configPath: "f", environment: { _ in nil })?
            .hasPrefix("no usable token: the credential token was not passed") == true)
        #expect(LinkReadiness.problem(configuration, configPath: "f", environment: { _ in "/creds" },
                                      readable: { $0 == "/creds/token" ? .empty : .ok })?
            .hasPrefix("no usable token: the credential token is empty") == true)
        #expect(LinkReadiness.problem(configuration, configPath: "f", environment: { _ in "/creds" },
                                      readable: { _ in .ok }) == nil)
        configuration.token = .command(["/bin/echo", "t"])
        #expect(LinkReadiness.problem(configuration, configPath: "f") == nil)
    }

    @Test func reloadPlan_appliesLimitsAtOnce_linkKeysByReconnect_andReportsTheRest() {
        let running = DaemonConfiguration()
        var fresh = running
        fresh.limits.outboxMessages = 5
        fresh.limits.maxSessions = 7
        fresh.server.endpoints = ["b:1"]
        fresh.server.tls.enabled = false  // TLS is on by default
        fresh.heartbeat.minSeconds = 5
        fresh.token = .file("/t")
        fresh.ipc.mode = 0o600
        fresh.limits.maxPayloadBytes = 10
        let plan = ReloadPlan(from: running, to: fresh)
        #expect(plan.changedLive == ["limits.max_sessions", "limits.outbox_messages"])
        #expect(plan.changedByReconnect == ["server.endpoints", "server.tls", "auth", "heartbeat"])
        #expect(plan.needsRestart == ["ipc", "limits.max_payload_bytes"])
        var expected = fresh
        expected.ipc = running.ipc
        expected.limits.maxPayloadBytes = running.limits.maxPayloadBytes
        #expect(plan.applied == expected)
        let report = ReloadReport(applied: plan.changedLive, reconnect: plan.changedByReconnect, needsRestart: plan.needsRestart)
        #expect(report.json == #"{"applied":["limits.max_sessions","limits.outbox_messages"],"#
            + #""applied_by_reconnect":["server.endpoints","server.tls","auth","heartbeat"],"#
            + #""needs_restart":["ipc","limits.max_payload_bytes"],"unconfigured":null}"#)
    }

    @Test func checkConfig_findsMissingFiles_uncreatableStore_andUnknownGroups_onTheirLines() throws {
        let text = """
            [server]
            endpoints = ["a:1"]
            [server.tls]
            ca_file = "/nonexistent/ca.pem"
            [auth]
            token_file = "/nonexistent/token"
            [ipc]
            group = "no-such-group-imagent"
            [store]
            directory = "/etc/passwd/store"
            """
        let configuration = try ConfigLoader.load(text: text, file: "c.toml")
        let problems = ConfigEnvironmentCheck.problems(configuration, text: text, file: "c.toml").map(\.description)
        #expect(problems == [
            "c.toml:4: server.tls.ca_file: cannot read /nonexistent/ca.pem: No such file or directory",
            "c.toml:6: auth.token_file: cannot read /nonexistent/token: No such file or directory",
            "c.toml:10: store.directory: /etc/passwd/store cannot be created: /etc/passwd is not a directory",
            "c.toml:8: ipc.group: no group named \"no-such-group-imagent\" on this system (see getent group)",
        ])
        // The defaults on a machine without the package's admin group: no problem.
        #expect(ConfigEnvironmentCheck.problems(DaemonConfiguration(), text: "", file: "e.toml").filter { $0.message.contains("group") }.isEmpty)
    }
}
