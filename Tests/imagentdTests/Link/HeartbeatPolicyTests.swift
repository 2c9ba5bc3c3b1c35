import IMAgentTestKit
import Testing

@testable import IMAgentCore

@Suite struct HeartbeatPolicyTests {
    /// Issue 11, finding 6: a server's HEARTBEAT_MS of 0 (or 1) must not make
    /// the daemon PING in a loop; it means one PING a second at most.
    @Test func tinyServerHeartbeat_isFlooredAtOneSecond() {
        for ceiling: Duration in [.zero, .milliseconds(1), .milliseconds(999)] {
            var harness = HeartbeatHarness(rtt: .milliseconds(1), serverCeiling: ceiling)
            harness.run(for: .seconds(600))
            #expect(harness.policy.interval == .seconds(1), "HEARTBEAT_MS \(ceiling)")
            #expect(harness.pings.count <= 600, "HEARTBEAT_MS \(ceiling): \(harness.pings.count) PINGs in 10 minutes")
            #expect(harness.pings.count >= 500, "the floor is an interval, not a stop")
            #expect(harness.deaths.isEmpty)
        }
    }

    @Test func fastAndSlowPaths_getDifferentActiveIntervals() {
        var fast = HeartbeatHarness(rtt: .milliseconds(5))
        var slow = HeartbeatHarness(rtt: .milliseconds(400))
        fast.run(for: .seconds(3 * 3600))
        slow.run(for: .seconds(3 * 3600))
        #expect(fast.policy.nat.interval == .seconds(300), "idle probing climbed to the maximum")
        #expect(slow.policy.nat.interval == .seconds(300))

        _ = fast.policy.sessionsActive(true, now: fast.now)
        _ = slow.policy.sessionsActive(true, now: slow.now)
        #expect(fast.policy.quality == .excellent)
        #expect(slow.policy.quality == .fair)
        #expect(fast.policy.interval == .seconds(120), "the active ceiling")
        #expect(slow.policy.interval == .seconds(60), "half of it on a 400 ms path")
        print("heartbeat: 5 ms RTT → \(fast.policy.interval), 400 ms RTT → \(slow.policy.interval) (sessions open)")
    }

    @Test func idleMode_usesALongerIntervalThanActiveMode() {
        var harness = HeartbeatHarness(rtt: .milliseconds(5))
        harness.run(for: .seconds(3 * 3600))
        let idle = harness.policy.interval
        _ = harness.policy.sessionsActive(true, now: harness.now)
        #expect(idle == .seconds(300))
        #expect(harness.policy.interval < idle)
    }

    @Test func lostPings_shortenTheInterval() {
        var harness = HeartbeatHarness(rtt: .milliseconds(5))
        harness.run(for: .seconds(3 * 3600))
        harness.apply(harness.policy.sessionsActive(true, now: harness.now))
        harness.run(for: .seconds(1200))
        #expect(harness.policy.interval == .seconds(120))

        harness.pingsToDrop = 1
        harness.run(for: .seconds(300))
        #expect(harness.deaths.isEmpty, "one lost PING is retried, not fatal")
        #expect(harness.policy.quality == .good)
        #expect(harness.policy.interval == .seconds(90))

        harness.pingsToDrop = 1
        harness.run(for: .seconds(300))
        #expect(harness.policy.quality == .fair)
        #expect(harness.policy.interval == .seconds(60))
    }

    @Test func serverCeiling_capsEveryInterval_evenBelowTheConfiguredMinimum() {
        var capped = HeartbeatHarness(rtt: .milliseconds(5), serverCeiling: .seconds(40))
        capped.run(for: .seconds(3 * 3600))
        #expect(capped.pings.count > 100)
        #expect(capped.pings.allSatisfy { $0.gap <= .seconds(40) })

        var tight = HeartbeatHarness(rtt: .milliseconds(5), serverCeiling: .seconds(5))
        tight.run(for: .seconds(600))
        #expect(tight.pings.allSatisfy { $0.gap <= .seconds(5) })
    }

    @Test func intervalsAreJitteredWithinTenPercent() {
        var harness = HeartbeatHarness(rtt: .milliseconds(5), serverCeiling: .seconds(300))
        harness.run(for: .seconds(4 * 3600))
        let late = harness.pings.filter { $0.at > at(3 * 3600) }.map(\.gap)
        #expect(late.allSatisfy { $0 >= .seconds(270) && $0 <= .seconds(300) }, "clamped at the 300 s bound")
        #expect(Set(late).count > 1, "not one synchronised value")
    }

    /// A NAT forgets flows idle for 200 s. Probing climbs, loses a link when
    /// a gap reaches 200 s, pins the longest gap that survived, and from then
    /// on no gap reaches the NAT timeout.
    @Test func natProbing_convergesBelowTheNATTimeout_andPins() {
        let natTimeout = Duration.seconds(200)
        var harness = HeartbeatHarness(rtt: .milliseconds(30), natTimeout: natTimeout)
        harness.run(for: .seconds(5 * 3600))

        let pinned = harness.policy.nat.interval
        print("NAT probing: T = 200 s, pinned at \(pinned) after \(harness.deaths.count) lost links, \(harness.pings.count) PINGs in 5 h")
        #expect(harness.policy.nat.isPinned)
        #expect(!harness.deaths.isEmpty, "probing found the limit")
        #expect(harness.deaths.count <= 3)
        #expect(pinned < natTimeout && pinned >= .seconds(15))
        #expect(pinned >= .seconds(120), "it converged near the timeout, not at the floor")
        let lastDeath = harness.deaths.last!
        #expect(harness.pings.filter { $0.at > lastDeath }.allSatisfy { $0.gap < natTimeout })
    }

    @Test func anyReceivedFrame_postponesThePing() {
        var policy = Heartbeat(random: SplitMix64(seed: 1))
        guard case .armTimer(let timer, let deadline) = policy.linkEstablished(serverCeiling: nil, now: at(0)) else {
            Issue.record("the idle timer is armed when the link comes up")
            return
        }
        #expect(deadline >= at(15) && deadline <= at(16.5))
        #expect(policy.frameReceived(now: at(10)) == .none, "no timer churn per frame")
        guard case .armTimer(_, let later) = policy.timerFired(timer, now: deadline) else {
            Issue.record("the timer re-arms from the last frame instead of pinging")
            return
        }
        #expect(later == at(10) + (deadline - at(0)))
    }

    @Test func linkIsDeclaredDead_afterTwoUnansweredPings() {
        var policy = Heartbeat(random: SplitMix64(seed: 1))
        _ = policy.linkEstablished(serverCeiling: nil, now: at(0))
        guard case .sendPing(let first, let firstTimer, let firstDeadline) = policy.resumedFromSuspend(now: at(1)) else {
            Issue.record("suspicion sends a PING at once")
            return
        }
        #expect(firstDeadline == at(16), "no RTT sample yet: the 15 s upper bound")
        guard case .sendPing(let second, let secondTimer, _) = policy.timerFired(firstTimer, now: firstDeadline) else {
            Issue.record("the first lost PING is retried at once")
            return
        }
        #expect(second != first)
        #expect(policy.timerFired(firstTimer, now: at(20)) == .none, "a stale timer is ignored")
        guard case .linkDead = policy.timerFired(secondTimer, now: at(31)) else {
            Issue.record("the second lost PING declares the link dead")
            return
        }
        #expect(policy.frameReceived(now: at(32)) == .none, "nothing happens on a dead link")
    }

    @Test func aSendLeftUnanswered_isSuspected_andADeadLinkFoundWithinSevenSeconds() {
        var policy = Heartbeat(random: SplitMix64(seed: 1))
        policy.seedRTT(sample: .milliseconds(5))
        _ = policy.linkEstablished(serverCeiling: nil, now: at(0))
        #expect(policy.frameSent(now: at(2)) == .none, "a frame owed no reply arms nothing")
        guard case .armTimer(let ackTimer, let ackDue) = policy.frameSent(now: at(3), awaitsReply: true) else {
            Issue.record("the first DATA after a receipt arms the ACK deadline")
            return
        }
        #expect(ackDue == at(4), "5 ms RTT: the 1 s floor")
        #expect(policy.frameSent(now: at(3.5), awaitsReply: true) == .none, "later sends keep the first deadline")
        guard case .sendPing(_, let pongTimer, let pongDue) = policy.timerFired(ackTimer, now: ackDue) else {
            Issue.record("nothing came back within the ACK deadline: PING at once")
            return
        }
        guard case .sendPing(_, let secondTimer, let secondDue) = policy.timerFired(pongTimer, now: pongDue) else {
            Issue.record("the lost PING is retried")
            return
        }
        guard case .linkDead = policy.timerFired(secondTimer, now: secondDue) else {
            Issue.record("two lost PINGs declare the link dead")
            return
        }
        #expect(secondDue - at(3) <= .seconds(7), "ACK deadline + 2 PONG deadlines on a fast path")
    }

    @Test func aReceiptClearsTheOwedReply_andTheIdleTimerTakesOver() {
        var policy = Heartbeat(random: SplitMix64(seed: 1))
        policy.seedRTT(sample: .milliseconds(5))
        guard case .armTimer(_, let idleDue) = policy.linkEstablished(serverCeiling: nil, now: at(0)) else {
            Issue.record("the idle timer is armed when the link comes up")
            return
        }
        guard case .armTimer(let ackTimer, let ackDue) = policy.frameSent(now: at(1), awaitsReply: true) else {
            Issue.record("DATA arms the ACK deadline")
            return
        }
        #expect(policy.frameReceived(now: at(1.2)) == .none, "the ACK arrives: no timer churn")
        guard case .armTimer(_, let next) = policy.timerFired(ackTimer, now: ackDue) else {
            Issue.record("with the reply received, the early firing only re-arms")
            return
        }
        #expect(next == at(1.2) + (idleDue - at(0)), "the silence interval counts from the last frame")
    }

    @Test func aFrameWhileWaitingForThePong_endsTheSuspicion() {
        var policy = Heartbeat(random: SplitMix64(seed: 1))
        _ = policy.linkEstablished(serverCeiling: nil, now: at(0))
        guard case .sendPing(_, let pongTimer, _) = policy.resumedFromSuspend(now: at(2)) else {
            Issue.record("a resume from suspend sends a PING at once")
            return
        }
        #expect(policy.resumedFromSuspend(now: at(2.5)) == .none, "one PING outstanding is enough")
        guard case .armTimer = policy.frameReceived(now: at(3)) else {
            Issue.record("proof of life goes back to the idle timer")
            return
        }
        #expect(policy.timerFired(pongTimer, now: at(17)) == .none)
    }

    @Test func pongDeadline_followsTheMeasuredRTT() {
        var estimator = RTTEstimator()
        #expect(estimator.pongDeadline == .seconds(15))
        for _ in 0..<10 { estimator.add(sample: .milliseconds(5)) }
        #expect(estimator.pongDeadline == .seconds(3))
        var slow = RTTEstimator()
        slow.add(sample: .seconds(2))
        #expect(slow.smoothed == .seconds(2) && slow.variation == .seconds(1))
        #expect(slow.pongDeadline == .seconds(7))
    }

    @Test func networkChange_forgetsThePinnedIntervalAndPingsAtOnce() {
        var harness = HeartbeatHarness(rtt: .milliseconds(30), natTimeout: .seconds(100))
        harness.run(for: .seconds(3 * 3600))
        #expect(harness.policy.nat.isPinned)
        guard case .sendPing = harness.policy.networkChanged(now: harness.now) else {
            Issue.record("a network change sends a PING at once")
            return
        }
        #expect(!harness.policy.nat.isPinned)
        #expect(harness.policy.nat.interval == .seconds(15), "probing starts over from the minimum")
        #expect(harness.policy.rtt.smoothed == nil)
    }

    @Test func suspendDetector_seesBoottimeRunAheadOfMonotonic() {
        var detector = SuspendDetector()
        let second: UInt64 = 1_000_000_000
        #expect(detector.sample(boottimeNanoseconds: 100 * second, monotonicNanoseconds: 90 * second) == nil)
        #expect(detector.sample(boottimeNanoseconds: 160 * second, monotonicNanoseconds: 150 * second) == nil)
        #expect(detector.sample(boottimeNanoseconds: 160 * second + 500_000, monotonicNanoseconds: 150 * second) == nil)
        let slept = detector.sample(boottimeNanoseconds: 1_000 * second, monotonicNanoseconds: 160 * second)
        #expect(slept == .nanoseconds(830 * Int64(second) - 500_000))
    }
}
