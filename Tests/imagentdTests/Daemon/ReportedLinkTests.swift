import Testing

@testable import IMAgentCore

/// The link as the daemon reports it, as a value: counts across a replaced engine, the old
/// engine's closing steps, the unconfigured state; and the connect-stage timer beside it.
struct ReportedLinkTests {
    let endpoint = Endpoint(host: "a.example", port: 7000)

    func transition(from: LinkPhase, to: LinkPhase, reconnects: Int = 0, attempts: Int = 0, error: String? = nil) -> LinkTransition {
        var status = LinkStatus(phase: to)
        status.reconnectCount = reconnects
        status.attempts = attempts
        status.lastError = error
        return LinkTransition(from: from, to: to, reason: "test", status: status)
    }

    @Test func aReplacedEngine_countsOnFromTheOldOnes_andItsClosingStepsChangeNothing() {
        var link = ReportedLink(unconfigured: nil)
        let up = link.apply(transition(from: .stopped(.notStarted), to: .connected(endpoint), reconnects: 2, attempts: 3), now: .now, nowMS: 1)
        #expect(up)
        link.replacingEngine()
        // The old engine closing: not reported.
        let closing = link.apply(transition(from: .connected(endpoint), to: .disconnecting), now: .now, nowMS: 2)
        #expect(!closing)
        #expect(link.status.state == "connected")
        // The new engine's first step, and its first connect: a reconnect after the old one's 2.
        let first = link.apply(transition(from: .stopped(.notStarted), to: .connecting(.token, endpoint), attempts: 1), now: .now, nowMS: 3)
        let connected = link.apply(transition(from: .connecting(.token, endpoint), to: .connected(endpoint), attempts: 1), now: .now, nowMS: 4)
        #expect(first && connected)
        #expect(link.status.reconnectCount == 3)
        #expect(link.status.attempts == 4)
    }

    @Test func anError_keepsTheTimeItFirstAppeared() {
        var link = ReportedLink(unconfigured: nil)
        _ = link.apply(transition(from: .stopped(.notStarted), to: .disconnecting, error: "refused"), now: .now, nowMS: 10)
        _ = link.apply(transition(from: .disconnecting, to: .waitingForNetwork, error: "refused"), now: .now, nowMS: 20)
        #expect(link.status.lastErrorAtUnixMS == 10)
        _ = link.apply(transition(from: .waitingForNetwork, to: .disconnecting, error: "reset"), now: .now, nowMS: 30)
        #expect(link.status.lastErrorAtUnixMS == 30)
    }

    @Test func unconfigured_isReported_andTheEnginesStepsDoNotReplaceIt() {
        var link = ReportedLink(unconfigured: nil)
        _ = link.apply(transition(from: .stopped(.notStarted), to: .connected(endpoint), reconnects: 1, attempts: 2), now: .now, nowMS: 1)
        let changed = link.configured(lacking: "no endpoints")
        #expect(changed)
        #expect(link.status.unconfigured == "no endpoints")
        #expect(link.status.reconnectCount == 1 && link.status.attempts == 2)
        let stepped = link.apply(transition(from: .connected(endpoint), to: .disconnecting), now: .now, nowMS: 2)
        #expect(!stepped)
        let configured = link.configured(lacking: nil)
        #expect(!configured)
        #expect(link.unconfigured == nil)
    }

    @Test func eachConnectStage_endsWhenALaterOneBeginsOrTheLinkIsUp() {
        var timer = ConnectStageTimer()
        let start = ContinuousClock.now
        let begun = timer.enter(.connecting(.token, endpoint), at: start)
        let same = timer.enter(.connecting(.token, endpoint), at: start + .milliseconds(5))
        #expect(begun == nil && same == nil)
        let token = timer.enter(.connecting(.tcp, endpoint), at: start + .milliseconds(10))
        #expect(token?.stage == .token && token?.took == .milliseconds(10))
        let tcp = timer.enter(.connected(endpoint), at: start + .milliseconds(25))
        #expect(tcp?.stage == .tcp && tcp?.took == .milliseconds(15))
        let down = timer.enter(.disconnecting, at: start + .milliseconds(30))
        #expect(down == nil)
    }
}
