import Testing

@testable import IMAgentCore

/// The three failure classes in the state machine (issue 12): a silent path
/// probes at a short interval without growing the backoff; a refusing or an
/// overloaded server backs off and grows it. Driven with the fake clock.
@Suite struct FailureClassTests {
    let a = Endpoint(host: "a.example", port: 7000)
    let b = Endpoint(host: "b.example", port: 7000)

    @Test func tcpTimeouts_probeEvery1To2Seconds_forever_withoutGrowingTheWindow() throws {
        var machine = makeMachine()
        var actions = machine.start(now: at(0))
        var now = at(0)
        var starts: [MonotonicInstant] = []
        var deadlines: [Duration] = []
        for number in 0..<300 {
            let attempt = try #require(actions.startedAttempt, "attempt \(number) starts")
            starts.append(now)
            _ = machine.tokenObtained(attempt, now: now)
            let tcp = machine.resolved(attempt, addresses: addresses, now: now)
            guard case .connectTCP(attempt, addresses, let timeout)? = tcp.last, let deadline = tcp.armedTimer else {
                Issue.record("attempt \(number) connects: \(tcp)")
                return
            }
            #expect(deadline.deadline == now + timeout, "the stage deadline is the socket's connect timeout")
            deadlines.append(timeout)
            now = deadline.deadline
            // No SYN-ACK, no RST: the TCP stage's deadline passes.
            let timedOut = machine.stageDeadlinePassed(deadline.id, now: now)
            #expect(timedOut.enteredPhase == .disconnecting)
            let closed = machine.connectionClosed(attempt, reason: "closed by us", now: now)
            let pause = try #require(closed.armedTimer)
            #expect(pause.purpose == .backoff)
            #expect(pause.deadline - now >= .milliseconds(50) && pause.deadline - now <= .milliseconds(100))
            if case .stateChanged(_, _, let reason)? = closed.first {
                #expect(reason.contains("path silent, probing"), "\(reason)")
            }
            now = pause.deadline
            actions = machine.backoffElapsed(pause.id, now: now)
        }
        #expect(deadlines[0] == .seconds(10), "the first attempt has the full stage deadline")
        #expect(deadlines.dropFirst().allSatisfy { $0 >= .seconds(1) && $0 <= .seconds(2) }, "probes: 1–2 s")
        let gaps = zip(starts.dropFirst(2), starts.dropFirst()).map { $0 - $1 }
        #expect(gaps.allSatisfy { $0 >= .milliseconds(1_050) && $0 <= .milliseconds(2_100) })
        #expect(machine.reconnectPolicy.window == .seconds(2), "300 silent attempts did not grow the window")
        #expect(machine.lastFailure == .pathSilent)
    }

    @Test func aRefusedConnect_endsProbing_andBacksOff() throws {
        var machine = makeMachine()
        var attempt = try #require(machine.start(now: at(0)).startedAttempt)
        _ = machine.tokenObtained(attempt, now: at(0))
        _ = machine.resolved(attempt, addresses: addresses, now: at(0))
        // A timeout reported by the socket (not the timer) is silent too.
        let silent = machine.stageFailed(attempt, stage: .tcp, reason: "connect timeout", pathSilent: true, now: at(10))
        let pause = try #require(silent.armedTimer)
        #expect(pause.deadline <= at(10.1))
        #expect(machine.probing)

        attempt = try #require(machine.backoffElapsed(pause.id, now: pause.deadline).startedAttempt)
        _ = machine.tokenObtained(attempt, now: pause.deadline)
        _ = machine.resolved(attempt, addresses: addresses, now: pause.deadline)
        // The server's host answers with RST: it is there and refusing.
        let refused = machine.stageFailed(attempt, stage: .tcp, reason: "connection refused", now: pause.deadline)
        let backoff = try #require(refused.armedTimer)
        #expect(backoff.deadline - pause.deadline >= .seconds(1) && backoff.deadline - pause.deadline <= .seconds(2))
        #expect(machine.reconnectPolicy.window == .seconds(4), "a refusal grows the window")
        #expect(machine.lastFailure == .serverRefusing)
        #expect(!machine.probing)

        attempt = try #require(machine.backoffElapsed(backoff.id, now: backoff.deadline).startedAttempt)
        _ = machine.tokenObtained(attempt, now: backoff.deadline)
        let tcp = machine.resolved(attempt, addresses: addresses, now: backoff.deadline)
        #expect(tcp.last == .connectTCP(attempt, addresses, timeout: .seconds(10)), "no longer a probe")
    }

    @Test func anEarlyUnreachable_waitsOutTheProbeDeadline_insteadOfSpinning() throws {
        var machine = makeMachine()
        let first = try #require(machine.start(now: at(0)).startedAttempt)
        _ = machine.tokenObtained(first, now: at(0))
        _ = machine.resolved(first, addresses: addresses, now: at(0))
        // EHOSTUNREACH at once: a router says the path is gone.
        let unreachable = machine.stageFailed(first, stage: .tcp, reason: "no route to host", pathSilent: true, now: at(0.01))
        let wait = try #require(unreachable.armedTimer)
        #expect(wait.deadline >= at(1) && wait.deadline <= at(2), "the rest of a 1–2 s probe interval")
    }

    @Test func silentEndpoints_failOverAtOnce_thenProbeTheRoundAgain() throws {
        var machine = makeMachine(endpoints: ["a.example:7000", "b.example:7000"])
        let first = try #require(machine.start(now: at(0)).startedAttempt)
        _ = machine.tokenObtained(first, now: at(0))
        let deadline = try #require(machine.resolved(first, addresses: addresses, now: at(0)).armedTimer)
        _ = machine.stageDeadlinePassed(deadline.id, now: deadline.deadline)
        let failover = machine.connectionClosed(first, reason: "closed by us", now: deadline.deadline)
        #expect(failover.enteredPhase == .connecting(.token, b), "the next endpoint at once")
        let second = try #require(failover.startedAttempt)
        _ = machine.tokenObtained(second, now: at(10))
        let probe = try #require(machine.resolved(second, addresses: addresses, now: at(10)).armedTimer)
        #expect(probe.deadline <= at(12), "already a probe")
        _ = machine.stageDeadlinePassed(probe.id, now: probe.deadline)
        let round = machine.connectionClosed(second, reason: "closed by us", now: probe.deadline)
        let pause = try #require(round.armedTimer)
        #expect(pause.deadline - probe.deadline <= .milliseconds(100))
        #expect(machine.backoffElapsed(pause.id, now: pause.deadline).enteredPhase == .connecting(.token, a))
        #expect(machine.reconnectPolicy.window == .seconds(2))
    }

    @Test func theProbeThatGetsThrough_becomesTheLink_withOneHandshake() throws {
        var machine = makeMachine(tls: true)
        let dead = connectedMachine(&machine, now: at(0))
        _ = machine.heartbeatTimedOut(dead, now: at(100))
        let probe = try #require(machine.connectionClosed(dead, reason: "closed by us", now: at(100)).startedAttempt)
        var performed: [LinkAction] = []
        performed += machine.tokenObtained(probe, now: at(100))
        performed += machine.resolved(probe, addresses: addresses, now: at(100))
        performed += machine.tcpConnected(probe, now: at(100.5))
        performed += machine.tlsEstablished(probe, now: at(100.6))
        performed += machine.helloOK(probe, hello, now: at(100.7))
        performed += machine.loginOK(probe, heartbeat: nil, now: at(100.8))
        #expect(machine.phase == .connected(a))
        #expect(performed.filter { if case .startTLS = $0 { true } else { false } }.count == 1)
        #expect(performed.filter { $0 == .sendHello(probe) }.count == 1)
        #expect(performed.filter { $0 == .sendLogin(probe) }.count == 1)
        #expect(performed.filter { $0 == .reopenSessions(probe) }.count == 1)
        #expect(!machine.probing, "a link ends probing")
        // The stages after TCP keep the full deadline: a probe only shortens the connect.
        let hello = performed.compactMap { action -> MonotonicInstant? in
            if case .armTimer(_, let deadline, .stageDeadline(.hello)) = action { deadline } else { nil }
        }
        #expect(hello == [at(110.6)])
    }

    @Test func aLinkClosedByTheServer_isARefusal_withTheHerdSpread() throws {
        var machine = makeMachine()
        let attempt = connectedMachine(&machine, now: at(0))
        let closed = machine.connectionClosed(attempt, reason: "reset by peer", now: at(600))
        let backoff = try #require(closed.armedTimer)
        #expect(backoff.deadline >= at(601) && backoff.deadline <= at(630))
        #expect(!machine.probing)
    }

    /// Issue 11, finding 6: whatever the server said, `imagent reconnect` connects now.
    @Test func userReconnect_overridesAServerDelay() throws {
        var machine = makeMachine()
        let attempt = connectedMachine(&machine, now: at(0))
        _ = machine.goaway(attempt, code: .overloaded, retryAfter: .milliseconds(Int64(UInt32.max)), redirect: nil, now: at(10))
        let parked = try #require(machine.connectionClosed(attempt, reason: "closed by us", now: at(10)).armedTimer)
        #expect(parked.deadline >= at(910) && parked.deadline <= at(911), "49 days capped at 15 minutes")
        #expect(machine.lastFailure == .serverOverloaded)
        let now = machine.userReconnect(now: at(20))
        #expect(now.first == .cancelTimer(parked.id))
        #expect(now.startedAttempt != nil, "at once")
        #expect(machine.reconnectPolicy.window == .seconds(2), "and with a fresh backoff")
        #expect(machine.lastFailure == nil)
    }

    @Test func probeMS_fromTheFile_setsTheProbeDeadlines() throws {
        var daemon = try ConfigLoader.load(text: "[server]\nendpoints = [\"127.0.0.1:7000\"]\n[reconnect]\nprobe_ms = 250", file: "f")
        daemon.token = .file("/dev/null")
        let validated = try LinkConfiguration(daemon).validated()
        #expect(validated.machine.reconnect.probe == .milliseconds(250))
        #expect(try ConfigLoader.load(text: "", file: "f").reconnect.probeMS == 1000, "1–2 s by default")
        #expect(throws: ConfigProblems.self) { try ConfigLoader.load(text: "[reconnect]\nprobe_ms = 50", file: "f") }

        var machine = makeMachine(reconnect: validated.machine.reconnect, seed: 3)
        let attempt = try #require(machine.start(now: at(0)).startedAttempt)
        _ = machine.tokenObtained(attempt, now: at(0))
        let deadline = try #require(machine.resolved(attempt, addresses: addresses, now: at(0)).armedTimer)
        _ = machine.stageDeadlinePassed(deadline.id, now: deadline.deadline)
        let pause = try #require(machine.connectionClosed(attempt, reason: "closed by us", now: deadline.deadline).armedTimer)
        let probe = try #require(machine.backoffElapsed(pause.id, now: pause.deadline).startedAttempt)
        _ = machine.tokenObtained(probe, now: pause.deadline)
        let tcp = machine.resolved(probe, addresses: addresses, now: pause.deadline)
        guard case .connectTCP(_, _, let timeout)? = tcp.last else {
            Issue.record("a probe connects: \(tcp)")
            return
        }
        #expect(timeout >= .milliseconds(250) && timeout <= .milliseconds(500))
    }

    @Test func goawayWithRetryAfterZero_waitsTheFloor() throws {
        var machine = makeMachine()
        let attempt = connectedMachine(&machine, now: at(0))
        _ = machine.goaway(attempt, code: .shutdown, retryAfter: .zero, redirect: nil, now: at(10))
        let closed = machine.connectionClosed(attempt, reason: "closed by us", now: at(10))
        #expect(closed.startedAttempt == nil, "not at once")
        let timer = try #require(closed.armedTimer)
        #expect(timer.deadline >= at(11) && timer.deadline <= at(12))
    }
}
