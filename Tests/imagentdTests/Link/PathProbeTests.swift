import IMAgentTestKit
import Testing

@testable import IMAgentCore

/// The probe beside a suspected link (`PathProbe`), driven with the fake
/// clock: a short partition that the heartbeat would not call dead yet is
/// proved healed by a probe within a probe interval of the heal.
@Suite struct PathProbeTests {
    typealias Probe = PathProbe<SplitMix64>

    func makeProbe(seed: UInt64 = 1, probe: Duration = .seconds(1)) -> Probe {
        Probe(reconnect: ReconnectPolicy.Configuration(probe: probe), random: SplitMix64(seed: seed))
    }

    /// A path silent in `[0, heal)` with a 1 ms round trip, and Linux's SYN
    /// timing: a connect begun at `s` with deadline `d` gets through at the
    /// first of `s`, `s + 1 s`, `s + 3 s` before `s + d` when the path is up.
    func outcome(start: MonotonicInstant, deadline: Duration, heal: MonotonicInstant) -> (Probe.Outcome, MonotonicInstant) {
        for resend in [Duration.zero, .seconds(1), .seconds(3)] where resend < deadline {
            let syn = start + resend
            if syn >= heal { return (.connected(after: resend + .milliseconds(1)), syn + .milliseconds(1)) }
        }
        return (.silent, start + deadline)
    }

    /// The first probe of a suspicion from `at(0)` (reply owed since 0, ACK
    /// deadline 1 s): the timer it arms, fired.
    func firstProbe(_ probe: inout Probe) -> Probe.ProbeID? {
        guard case .armTimer(let timer, let due)? = probe.replyOwed(since: at(0), ackDeadline: .seconds(1), now: at(0)).first,
            case .connect(let first, _)? = probe.timerFired(timer, now: due).first
        else { return nil }
        return first
    }

    /// Runs one suspicion from `at(0)` (DATA unanswered since 0, ACK deadline
    /// 1 s) to the path-back verdict; returns when it came.
    func runPartition(healAt heal: MonotonicInstant, seed: UInt64) -> MonotonicInstant? {
        var probe = makeProbe(seed: seed)
        var now = at(0)
        var actions = probe.replyOwed(since: now, ackDeadline: .seconds(1), now: now)
        for _ in 0..<100 {
            guard let action = actions.first else { return nil }
            switch action {
            case .armTimer(let id, let deadline):
                now = deadline
                actions = probe.timerFired(id, now: now)
            case .connect(let id, let deadline):
                #expect(deadline >= .seconds(1) && deadline <= .seconds(2))
                let (result, when) = outcome(start: now, deadline: deadline, heal: heal)
                now = when
                actions = probe.probeEnded(id, result, now: now)
            case .pathBack:
                return now
            case .abandon:
                return nil
            }
        }
        return nil
    }

    @Test func shortPartitions_areProvedHealedWithin1_1sOfTheHeal() throws {
        var worst = Duration.zero
        for seed in UInt64(1)...40 {
            // From after the first probe (1 s + at most 2 s) on.
            for tenth in stride(from: 31, through: 90, by: 3) {
                let heal = at(Double(tenth) / 10)
                let back = try #require(runPartition(healAt: heal, seed: seed), "seed \(seed), heal \(heal)")
                #expect(back >= heal)
                worst = max(worst, back - heal)
            }
        }
        // The SYN resent 1 s into a probe, or the next probe 50–100 ms after
        // a 1 s one: at most 1.1 s (plus the round trip) after the heal.
        #expect(worst <= .milliseconds(1_101), "\(worst)")
        #expect(worst >= .milliseconds(900), "the worst phase was reached: \(worst)")
    }

    @Test func probingStartsAtTheACKDeadline_ofTheOldestFrameOwed() {
        var probe = makeProbe()
        let armed = probe.replyOwed(since: at(10), ackDeadline: .seconds(2), now: at(10.5))
        guard case .armTimer(let id, let deadline)? = armed.first else {
            Issue.record("a timer: \(armed)")
            return
        }
        #expect(deadline == at(12))
        #expect(probe.replyOwed(since: at(10), ackDeadline: .seconds(2), now: at(11)).isEmpty, "already waiting")
        let started = probe.timerFired(id, now: at(12))
        guard case .connect? = started.first else {
            Issue.record("a probe at the deadline: \(started)")
            return
        }
        #expect(probe.active)
    }

    @Test func aBusyHealthyLink_armsOneTimerPerACKDeadline_notOnePerFrame() {
        var probe = makeProbe()
        var arms = 0
        var connects = 0
        var now = at(0)
        var armed: (PathProbe<SplitMix64>.TimerID, MonotonicInstant)?
        // 10,000 DATA/ACK round trips of 1 ms over 10 s.
        for _ in 0..<10_000 {
            for action in probe.replyOwed(since: now, ackDeadline: .seconds(1), now: now) {
                if case .armTimer(let id, let deadline) = action {
                    arms += 1
                    armed = (id, deadline)
                }
            }
            now = now + .milliseconds(1)
            _ = probe.cleared()
            if let (id, deadline) = armed, deadline <= now {
                armed = nil
                for action in probe.timerFired(id, now: deadline) {
                    if case .connect = action { connects += 1 }
                }
            }
        }
        #expect(connects == 0, "a link that gets its replies is never probed")
        #expect(arms <= 11, "\(arms) timers for 10,000 round trips")
    }

    @Test func aProbeThatConnectsAtOnce_leavesTheLinkAlone_untilTheSuspicionClears() throws {
        var probe = makeProbe()
        let first = try #require(firstProbe(&probe), "a probe")
        #expect(probe.probeEnded(first, .connected(after: .milliseconds(3)), now: at(1.003)).isEmpty, "the path answers: not the path's silence")
        #expect(!probe.active)
        #expect(probe.replyOwed(since: at(0), ackDeadline: .seconds(1), now: at(2)).isEmpty, "one verdict per suspicion")
        _ = probe.cleared()
        #expect(!probe.replyOwed(since: at(3), ackDeadline: .seconds(1), now: at(3)).isEmpty, "a new suspicion probes again")
    }

    @Test func aRefusedProbe_endsProbing() throws {
        var probe = makeProbe()
        let first = try #require(firstProbe(&probe), "a probe")
        #expect(probe.probeEnded(first, .refused, now: at(1.001)).isEmpty)
        #expect(!probe.active, "the host is there and refusing: the heartbeat decides")
    }

    @Test func aFirstProbeWhoseSYNWasResent_provesNothing_aLossyPathDoesThat() throws {
        var probe = makeProbe()
        let first = try #require(firstProbe(&probe), "a probe")
        #expect(probe.probeEnded(first, .connected(after: .milliseconds(1_002)), now: at(2.002)).isEmpty)
        #expect(!probe.active)
    }

    @Test func aFrameReceived_abandonsTheProbeInFlight_andItsLateResultIsIgnored() throws {
        var probe = makeProbe()
        let first = try #require(firstProbe(&probe), "a probe")
        #expect(probe.cleared() == [.abandon(first)])
        #expect(probe.probeEnded(first, .connected(after: .seconds(1.5)), now: at(2.5)).isEmpty)
        #expect(!probe.active)
    }

    @Test func pathReturned_replacesTheLink_andReconnectsAtOnceWithAProbe() throws {
        var machine = makeMachine()
        let link = connectedMachine(&machine, now: at(0))
        let closing = machine.pathReturned(link, reason: "path back: a probe connected", now: at(100))
        #expect(closing.contains(.closeConnection(link, sendError: nil)))
        let next = try #require(machine.connectionClosed(link, reason: "closed by us", now: at(100)).startedAttempt)
        #expect(machine.reconnectPolicy.window == .seconds(2), "the backoff does not grow")
        _ = machine.tokenObtained(next, now: at(100))
        guard case .connectTCP(_, _, let timeout)? = machine.resolved(next, addresses: addresses, now: at(100)).last else {
            Issue.record("a connect")
            return
        }
        #expect(timeout <= .seconds(2), "the new connect is a probe")
        #expect(machine.pathReturned(link, reason: "late", now: at(101)).first.map { if case .ignored = $0 { true } else { false } } == true)
    }
}
