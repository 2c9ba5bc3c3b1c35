import IMAgentTestKit
import Testing

@testable import IMAgentCore

@Suite struct ReconnectPolicyTests {
    @Test func delaysStayWithinBaseAndCap_forThousandsOfFailures() {
        var random = SplitMix64(seed: 7)
        var policy = ReconnectPolicy()
        for _ in 0..<5_000 {
            let delay = policy.attemptFailed(using: &random)
            #expect(delay >= .seconds(1))
            #expect(delay <= .seconds(60))
        }
        #expect(policy.window == .seconds(60), "it keeps trying at the cap")
    }

    @Test func windowDoublesPerFailure_asTheTableSays() {
        var random = SplitMix64(seed: 1)
        var policy = ReconnectPolicy()
        var windows: [Duration] = [policy.window]
        for _ in 0..<7 {
            let before = policy.window
            let delay = policy.attemptFailed(using: &random)
            #expect(delay >= .seconds(1) && delay <= before)
            windows.append(policy.window)
        }
        #expect(windows == [2, 4, 8, 16, 32, 60, 60, 60].map { Duration.seconds($0) })
    }

    @Test func firstRetryAfterLosingAStableLink_isSpreadOverTheHerdWindow() {
        var random = SplitMix64(seed: 3)
        var delays: [Duration] = []
        for _ in 0..<2_000 {
            var policy = ReconnectPolicy()
            delays.append(policy.linkLost(upFor: .seconds(3600), using: &random))
        }
        #expect(delays.allSatisfy { $0 >= .seconds(1) && $0 <= .seconds(30) })
        #expect(delays.min()! < .seconds(3) && delays.max()! > .seconds(27), "the whole window is used")
    }

    @Test func backoffResetsOnlyAfterTheStablePeriod() {
        // Without a herd spread the reset is visible in the window itself.
        let configuration = ReconnectPolicy.Configuration(herdSpread: .seconds(1))
        var random = SplitMix64(seed: 5)
        var policy = ReconnectPolicy(configuration: configuration)
        for _ in 0..<6 { _ = policy.attemptFailed(using: &random) }
        #expect(policy.window == .seconds(60))

        _ = policy.linkLost(upFor: .seconds(29), using: &random)
        #expect(policy.window == .seconds(60), "a link up for 29 s did not earn a reset")

        let delay = policy.linkLost(upFor: .seconds(30), using: &random)
        #expect(delay <= .seconds(2))
        #expect(policy.window == .seconds(4), "a stable link starts the table over")
    }

    @Test func serverDirectedDelays_areObeyedWithinTheFloorAndTheCap_andGrowTheWindow() {
        var random = SplitMix64(seed: 9)
        var policy = ReconnectPolicy()
        for _ in 0..<1_000 {
            let delay = policy.serverDirected(retryAfter: .seconds(5), using: &random)
            #expect(delay >= .seconds(5) && delay <= .seconds(6), "5 s + at most 20 % (1 s)")
        }
        #expect(policy.window == .seconds(60), "a GOAWAY is a refusal: the window grew to the cap")

        policy.reset()
        for retryAfter: Duration? in [nil, .zero, .milliseconds(1)] {
            let delay = policy.serverDirected(retryAfter: retryAfter, using: &random)
            #expect(delay >= .seconds(1) && delay <= .seconds(2), "GOAWAY \(String(describing: retryAfter)): the floor, never at once")
        }
    }

    @Test func overloaded_honoursRetryAfterPlusBoundedJitter_withinTheFloorAndTheCap() {
        var random = SplitMix64(seed: 11)
        var policy = ReconnectPolicy()
        var longest = Duration.zero
        for _ in 0..<1_000 {
            let delay = policy.overloaded(retryAfter: .seconds(10), using: &random)
            #expect(delay >= .seconds(10) && delay <= .seconds(11), "10 s + at most 1 s, not 20 % of it")
            longest = max(longest, delay)
        }
        #expect(longest > .milliseconds(10_900), "the jitter is used")
        #expect(policy.window == .seconds(60), "OVERLOADED grows the window")

        policy.reset()
        let short = policy.overloaded(retryAfter: .milliseconds(100), using: &random)
        #expect(short >= .seconds(1) && short <= .milliseconds(1_200), "at least the floor")
        let unspecified = policy.overloaded(retryAfter: nil, using: &random)
        #expect(unspecified >= .seconds(1) && unspecified <= .seconds(4), "without RETRY_AFTER_MS: the backoff")

        // A RETRY_AFTER_MS of 49.7 days (UInt32.max ms) parks the daemon for 15 minutes at most.
        let parked = policy.overloaded(retryAfter: .milliseconds(Int64(UInt32.max)), using: &random)
        #expect(parked >= .seconds(900) && parked <= .seconds(901))
    }

    @Test func aSilentPath_probesAtAShortJitteredInterval_andNeverGrowsTheWindow() {
        var random = SplitMix64(seed: 13)
        var policy = ReconnectPolicy()
        _ = policy.attemptFailed(using: &random)
        var deadlines: [Duration] = []
        for _ in 0..<2_000 {
            deadlines.append(policy.probeDeadline(using: &random))
            policy.linkDiedSilently(upFor: .seconds(5))
            let pause = policy.probePause(elapsed: deadlines.last!, deadline: deadlines.last!, using: &random)
            #expect(pause >= .milliseconds(50) && pause <= .milliseconds(100), "after a probe's deadline: the short gap")
        }
        #expect(deadlines.allSatisfy { $0 >= .seconds(1) && $0 <= .seconds(2) })
        #expect(deadlines.min()! < .milliseconds(1_050) && deadlines.max()! > .milliseconds(1_950), "jittered over the range")
        #expect(policy.window == .seconds(4), "probing left the window where the refusal put it")

        // A router's "unreachable" 10 ms into a 1.5 s probe: the next waits out the rest of a probe interval.
        for _ in 0..<100 {
            let early = policy.probePause(elapsed: .milliseconds(10), deadline: .milliseconds(1_500), using: &random)
            #expect(early >= .milliseconds(990) && early <= .milliseconds(1_490))
        }

        policy.linkDiedSilently(upFor: .seconds(60))
        #expect(policy.window == .seconds(2), "a stable link forgives the earlier refusal")
    }

    /// 10,000 agents lose their links at t = 0 (a server crash); the server
    /// refuses connections for 20 s, then accepts them all. Each agent is a
    /// real `LinkStateMachine`; an attempt is counted when its token stage
    /// starts. The attempt rate over the first minute must stay flat: no
    /// second may see more than twice the minute's mean.
    @Test func tenThousandAgents_reconnectWithoutAStampede_afterAServerRestart() {
        let agents = 10_000
        let outage = 20.0
        var buckets = [Int](repeating: 0, count: 60)
        var connected = 0

        for index in 0..<agents {
            var machine = makeMachine(seed: UInt64(index) &* 0x9E37_79B9 &+ 1)
            let attempt = connectedMachine(&machine, now: at(-3600))
            var actions = machine.connectionClosed(attempt, reason: "reset by peer", now: at(0))
            while let timer = actions.armedTimer, timer.purpose == .backoff {
                let now = timer.deadline
                guard now < at(60) else { break }
                let started = machine.backoffElapsed(timer.id, now: now)
                let attempt = started.startedAttempt!
                buckets[Int(now.sinceOrigin.wholeNanoseconds / 1_000_000_000)] += 1
                _ = machine.tokenObtained(attempt, now: now)
                _ = machine.resolved(attempt, addresses: addresses, now: now)
                if now < at(outage) {
                    actions = machine.stageFailed(attempt, stage: .tcp, reason: "connection refused", now: now)
                } else {
                    completeAttempt(attempt, on: &machine, now: now)
                    connected += 1
                    break
                }
            }
        }

        let total = buckets.reduce(0, +)
        let mean = Double(total) / 60
        let peak = buckets.max()!
        print("herd simulation: \(agents) agents, \(total) attempts in the first minute, peak \(peak)/s, mean \((mean * 10).rounded() / 10)/s, \(connected) connected")
        #expect(Double(peak) <= 2 * mean)
        #expect(buckets[0] == 0, "nobody reconnects in the very second the server died")
        #expect(connected >= agents * 4 / 5, "four in five agents are back within the minute")
    }
}
