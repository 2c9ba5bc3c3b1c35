import IMAgentTestKit
import IMLink
import Testing

@testable import IMAgentCore

@Suite struct LinkStateMachineTests {
    let a = Endpoint(host: "a.example", port: 7000)
    let b = Endpoint(host: "b.example", port: 7000)

    @Test func walksEveryStage_fromStartToConnected() {
        var machine = makeMachine()
        let start = machine.start(now: at(0))
        let attempt = AttemptID.first
        guard case .armTimer(let tokenTimer, at(10), .stageDeadline(.token)) = start[1] else {
            Issue.record("the token stage has a 10 s deadline: \(start)")
            return
        }
        #expect(start[0] == .stateChanged(from: .stopped(.notStarted), to: .connecting(.token, a), reason: "daemon started"))
        #expect(start[2] == .obtainToken(attempt, dropCached: false))

        let token = machine.tokenObtained(attempt, now: at(1))
        #expect(token.first == .cancelTimer(tokenTimer))
        #expect(token.enteredPhase == .connecting(.resolve, a))
        #expect(token.last == .resolve(attempt, a))
        #expect(token.armedTimer?.deadline == at(11))

        let resolved = machine.resolved(attempt, addresses: addresses, now: at(2))
        #expect(resolved.enteredPhase == .connecting(.tcp, a))
        #expect(resolved.last == .connectTCP(attempt, addresses, timeout: .seconds(10)))

        let tcp = machine.tcpConnected(attempt, now: at(3))
        #expect(tcp.enteredPhase == .connecting(.hello, a), "no TLS configured")
        #expect(tcp.last == .sendHello(attempt))

        let helloOK = machine.helloOK(attempt, hello, now: at(4))
        #expect(helloOK.enteredPhase == .connecting(.login, a))
        #expect(helloOK.last == .sendLogin(attempt))
        guard let loginTimer = helloOK.armedTimer?.id else {
            Issue.record("the login stage has a deadline")
            return
        }

        let loginOK = machine.loginOK(attempt, heartbeat: .seconds(90), now: at(5))
        #expect(
            loginOK == [
                .cancelTimer(loginTimer),
                .stateChanged(from: .connecting(.login, a), to: .connected(a), reason: "LOGIN_OK"),
                .startHeartbeat(attempt, serverCeiling: .seconds(90)),
                .reopenSessions(attempt),
            ]
        )
        #expect(machine.negotiated == hello)
    }

    @Test func runsTheTLSStage_whenConfigured() {
        var machine = makeMachine(tls: true)
        let attempt = machine.start(now: at(0)).startedAttempt!
        _ = machine.tokenObtained(attempt, now: at(0))
        _ = machine.resolved(attempt, addresses: addresses, now: at(0))
        let tcp = machine.tcpConnected(attempt, now: at(1))
        #expect(tcp.enteredPhase == .connecting(.tls, a))
        #expect(tcp.last == .startTLS(attempt, a))
        let tls = machine.tlsEstablished(attempt, now: at(2))
        #expect(tls.last == .sendHello(attempt))
    }

    @Test func failsOverToTheNextEndpointAtOnce_thenBacksOffAfterAFullRound() {
        var machine = makeMachine(endpoints: ["a.example:7000", "b.example:7000"])
        let first = machine.start(now: at(0)).startedAttempt!
        _ = machine.tokenObtained(first, now: at(0))
        _ = machine.resolved(first, addresses: addresses, now: at(0))
        let failover = machine.stageFailed(first, stage: .tcp, reason: "refused", now: at(1))
        #expect(failover.enteredPhase == .connecting(.token, b))
        let second = failover.startedAttempt!
        #expect(second == first.next)

        _ = machine.tokenObtained(second, now: at(1))
        let noAddresses = machine.resolved(second, addresses: [], now: at(2))
        #expect(noAddresses.startedAttempt == nil, "the round is over")
        guard let backoff = noAddresses.armedTimer, backoff.purpose == .backoff else {
            Issue.record("a full round of failures backs off: \(noAddresses)")
            return
        }
        #expect(backoff.deadline >= at(3) && backoff.deadline <= at(4))
        #expect(machine.rotation.failedThisRound.isEmpty)

        let retry = machine.backoffElapsed(backoff.id, now: backoff.deadline)
        #expect(retry.enteredPhase == .connecting(.token, a), "every round starts from the preferred endpoint")
    }

    @Test func usesAGoawayRedirect_forTheNextAttemptOnly() throws {
        var machine = makeRedirectMachine(endpoints: ["a.example:7000", "b.example:7000"], redirectAllow: ["[2001:db8::7]"])
        let attempt = connectedMachine(&machine, now: at(0))
        let redirect = Endpoint(parsing: "[2001:db8::7]:7443")!
        let goaway = machine.goaway(attempt, code: .shutdown, retryAfter: nil, redirect: redirect, now: at(100))
        #expect(goaway.enteredPhase == .disconnecting)
        #expect(goaway.last == .closeConnection(attempt, sendError: nil))

        let closed = machine.connectionClosed(attempt, reason: "closed by us", now: at(100))
        let floor = try #require(closed.armedTimer, "GOAWAY without RETRY_AFTER_MS: after the floor, not at once")
        #expect(floor.deadline >= at(101) && floor.deadline <= at(102))
        let retried = machine.backoffElapsed(floor.id, now: floor.deadline)
        #expect(retried.enteredPhase == .connecting(.token, redirect))
        let redirected = retried.startedAttempt!
        _ = machine.tokenObtained(redirected, now: at(100))
        let failed = machine.stageFailed(redirected, stage: .resolve, reason: "NXDOMAIN", now: at(101))
        #expect(failed.enteredPhase == .connecting(.token, a), "back to the configured endpoints, at once")
    }

    @Test func goawayWithRetryAfter_waitsThatLong_andGrowsTheBackoff() {
        var machine = makeMachine()
        var actions = machine.start(now: at(0))
        // Two failed rounds grow the window to 8 s.
        for _ in 0..<2 {
            let attempt = actions.startedAttempt!
            _ = machine.tokenObtained(attempt, now: at(0))
            let backoff = machine.stageFailed(attempt, stage: .resolve, reason: "NXDOMAIN", now: at(0)).armedTimer!
            actions = machine.backoffElapsed(backoff.id, now: backoff.deadline)
        }
        let attempt = actions.startedAttempt!
        completeAttempt(attempt, on: &machine, now: at(100))
        #expect(machine.reconnectPolicy.window == .seconds(8))

        _ = machine.goaway(attempt, code: .shutdown, retryAfter: .seconds(5), redirect: nil, now: at(110))
        let closed = machine.connectionClosed(attempt, reason: "closed by us", now: at(110))
        guard let timer = closed.armedTimer else {
            Issue.record("RETRY_AFTER_MS arms the backoff timer")
            return
        }
        #expect(timer.deadline >= at(115) && timer.deadline <= at(116))
        #expect(machine.reconnectPolicy.window == .seconds(16), "a GOAWAY is a refusal: the window grows")
    }

    @Test func tokenInvalid_dropsTheTokenAndBacksOff() {
        var machine = makeMachine()
        let attempt = startAndReachLogin(&machine)
        let fail = machine.loginFail(attempt, code: .tokenInvalid, retryAfter: nil, now: at(1))
        #expect(fail.last == .closeConnection(attempt, sendError: nil))
        let closed = machine.connectionClosed(attempt, reason: "closed by server", now: at(1))
        guard let backoff = closed.armedTimer, backoff.purpose == .backoff else {
            Issue.record("TOKEN_INVALID backs off")
            return
        }
        let retry = machine.backoffElapsed(backoff.id, now: backoff.deadline)
        #expect(retry.last == .obtainToken(attempt.next, dropCached: true))
    }

    @Test func tokenExpired_dropsTheTokenAndReconnectsAtOnce_withoutABackoffStep() {
        var machine = makeMachine()
        let attempt = startAndReachLogin(&machine)
        let window = machine.reconnectPolicy.window
        _ = machine.loginFail(attempt, code: .tokenExpired, retryAfter: nil, now: at(1))
        let closed = machine.connectionClosed(attempt, reason: "closed by server", now: at(1))
        #expect(closed.last == .obtainToken(attempt.next, dropCached: true))
        #expect(machine.reconnectPolicy.window == window)
    }

    @Test func forbiddenLogin_stopsUntilTheUserConnects() {
        var machine = makeMachine()
        let attempt = startAndReachLogin(&machine)
        _ = machine.loginFail(attempt, code: .forbidden, retryAfter: nil, now: at(1))
        let closed = machine.connectionClosed(attempt, reason: "closed by server", now: at(1))
        #expect(closed.enteredPhase == .stopped(.refused(.forbidden)))
        #expect(closed.armedTimer == nil, "no retry")
        #expect(machine.networkUp(now: at(2)).isEmpty, "not even on a network change")
        #expect(machine.userConnect(now: at(3)).enteredPhase == .connecting(.token, a))
    }

    @Test func versionUnsupported_stopsTheLink() {
        var machine = makeMachine()
        let attempt = machine.start(now: at(0)).startedAttempt!
        _ = machine.tokenObtained(attempt, now: at(0))
        _ = machine.resolved(attempt, addresses: addresses, now: at(0))
        _ = machine.tcpConnected(attempt, now: at(0))
        _ = machine.errorFrame(attempt, code: .versionUnsupported, now: at(1))
        let closed = machine.connectionClosed(attempt, reason: "closed by server", now: at(1))
        #expect(closed.enteredPhase == .stopped(.refused(.versionUnsupported)))
    }

    @Test func overloadedLogin_waitsForRetryAfterPlusJitter() {
        var machine = makeMachine()
        let attempt = startAndReachLogin(&machine)
        _ = machine.loginFail(attempt, code: .overloaded, retryAfter: .seconds(20), now: at(1))
        let closed = machine.connectionClosed(attempt, reason: "closed by server", now: at(1))
        let deadline = closed.armedTimer!.deadline
        #expect(deadline >= at(21) && deadline <= at(25))
    }

    @Test func protocolErrorFromTheServer_closesAndBacksOffWithTheHerdSpread() {
        var machine = makeMachine()
        let attempt = connectedMachine(&machine, now: at(0))
        _ = machine.errorFrame(attempt, code: .protocolError, now: at(600))
        let closed = machine.connectionClosed(attempt, reason: "closed by server", now: at(600))
        let deadline = closed.armedTimer!.deadline
        #expect(deadline >= at(601) && deadline <= at(630))
    }

    @Test func outOfPhaseFrame_isAProtocolViolation_answeredWithError() {
        var machine = makeMachine()
        let attempt = connectedMachine(&machine, now: at(0))
        let late = machine.helloOK(attempt, hello, now: at(5))
        #expect(late.enteredPhase == .disconnecting)
        #expect(late.last == .closeConnection(attempt, sendError: .protocolError))
    }

    @Test func unsupportedVersionInHelloOK_isAProtocolViolation() {
        var machine = makeMachine()
        let attempt = machine.start(now: at(0)).startedAttempt!
        _ = machine.tokenObtained(attempt, now: at(0))
        _ = machine.resolved(attempt, addresses: addresses, now: at(0))
        _ = machine.tcpConnected(attempt, now: at(0))
        let bad = HelloResult(version: 9, features: [], maxFrame: 1024)
        #expect(machine.helloOK(attempt, bad, now: at(1)).last == .closeConnection(attempt, sendError: .protocolError))
    }

    @Test func stageDeadline_abandonsTheAttempt_andLateResultsAreIgnored() {
        var machine = makeMachine(endpoints: ["a.example:7000", "b.example:7000"])
        let attempt = machine.start(now: at(0)).startedAttempt!
        let resolveTimer = machine.tokenObtained(attempt, now: at(0)).armedTimer!.id
        let timedOut = machine.stageDeadlinePassed(resolveTimer, now: at(10))
        #expect(timedOut.first == .abandonAttempt(attempt))
        #expect(timedOut.enteredPhase == .connecting(.token, b))

        #expect(machine.resolved(attempt, addresses: addresses, now: at(11)).isIgnored, "a late result of the abandoned attempt")
        #expect(machine.stageDeadlinePassed(resolveTimer, now: at(12)).isIgnored, "a stale timer")
    }

    @Test func handshakeDeadline_closesTheSocketFirst() {
        var machine = makeMachine()
        let attempt = machine.start(now: at(0)).startedAttempt!
        _ = machine.tokenObtained(attempt, now: at(0))
        _ = machine.resolved(attempt, addresses: addresses, now: at(0))
        let helloTimer = machine.tcpConnected(attempt, now: at(0)).armedTimer!.id
        let timedOut = machine.stageDeadlinePassed(helloTimer, now: at(10))
        #expect(timedOut.enteredPhase == .disconnecting)
        #expect(timedOut.last == .closeConnection(attempt, sendError: nil))
        let closed = machine.connectionClosed(attempt, reason: "closed by us", now: at(10))
        #expect(closed.armedTimer?.purpose == .backoff)
    }

    @Test func reconnectsAtOnce_whenNetworkComesBack() {
        var machine = makeMachine()
        let attempt = connectedMachine(&machine, now: at(0))
        let down = machine.networkDown(now: at(100))
        #expect(down.last == .closeConnection(attempt, sendError: nil))
        let closed = machine.connectionClosed(attempt, reason: "closed by us", now: at(100))
        #expect(closed == [.stateChanged(from: .disconnecting, to: .waitingForNetwork, reason: "network down")])
        #expect(machine.userDisconnect(now: at(101)).enteredPhase == .stopped(.userDisconnected))
        #expect(machine.userConnect(now: at(102)).startedAttempt != nil)
        _ = machine.networkDown(now: at(103))
        #expect(machine.phase == .waitingForNetwork)

        let up = machine.networkUp(now: at(500))
        #expect(up.enteredPhase == .connecting(.token, a))
        #expect(up.startedAttempt != nil)
    }

    @Test func networkDown_cancelsTheBackoffAndWaitsQuietly() {
        var machine = makeMachine()
        let attempt = machine.start(now: at(0)).startedAttempt!
        let failed = machine.stageFailed(attempt, stage: .token, reason: "token file missing", now: at(0))
        let backoff = failed.armedTimer!
        let down = machine.networkDown(now: at(0.5))
        #expect(down.first == .cancelTimer(backoff.id))
        #expect(down.enteredPhase == .waitingForNetwork)
        #expect(machine.backoffElapsed(backoff.id, now: backoff.deadline).isIgnored)
        #expect(machine.phase == .waitingForNetwork)
    }

    @Test func failureWithoutNetwork_waitsForTheNetwork_notForATimer() {
        var machine = makeMachine()
        _ = machine.networkDown(now: at(0))
        #expect(machine.start(now: at(0)).enteredPhase == .waitingForNetwork)
    }

    @Test func userDisconnect_closesAndStaysStopped() {
        var machine = makeMachine()
        let attempt = connectedMachine(&machine, now: at(0))
        let disconnect = machine.userDisconnect(now: at(5))
        #expect(disconnect.last == .closeConnection(attempt, sendError: nil))
        #expect(machine.heartbeatTimedOut(attempt, now: at(5)).isIgnored)
        let closed = machine.connectionClosed(attempt, reason: "closed by us", now: at(5))
        #expect(closed.enteredPhase == .stopped(.userDisconnected))
        #expect(machine.userDisconnect(now: at(6)).isIgnored)
        #expect(machine.start(now: at(6)).isIgnored)
    }

    @Test func userReconnect_dropsTheLinkAndConnectsAtOnce() {
        var machine = makeMachine()
        let attempt = connectedMachine(&machine, now: at(0))
        _ = machine.userReconnect(now: at(5))
        let closed = machine.connectionClosed(attempt, reason: "closed by us", now: at(5))
        #expect(closed.enteredPhase == .connecting(.token, a))
    }

    @Test func shutdown_isFinal() {
        var machine = makeMachine()
        let attempt = connectedMachine(&machine, now: at(0))
        _ = machine.shutdown(now: at(5))
        #expect(machine.userConnect(now: at(5)).isIgnored, "nothing connects after a shutdown")
        let closed = machine.connectionClosed(attempt, reason: "closed by us", now: at(5))
        #expect(closed.enteredPhase == .stopped(.shutdown))
        #expect(machine.userConnect(now: at(6)).isIgnored)
        #expect(machine.userReconnect(now: at(6)).isIgnored)
        #expect(machine.shutdown(now: at(6)).isIgnored)
    }

    @Test func heartbeatTimeout_closesAndProbesAtOnce_withoutGrowingTheBackoff() throws {
        var machine = makeMachine(reconnect: ReconnectPolicy.Configuration(herdSpread: .seconds(1)))
        let attempt = connectedMachine(&machine, now: at(0))
        _ = machine.heartbeatTimedOut(attempt, now: at(10))
        let closed = machine.connectionClosed(attempt, reason: "closed by us", now: at(10))
        let probe = try #require(closed.startedAttempt, "a silent path: the next attempt starts at once")
        #expect(machine.reconnectPolicy.window == .seconds(2), "up 10 s, found dead: the window did not grow")
        #expect(machine.probing)

        _ = machine.tokenObtained(probe, now: at(10))
        let tcp = machine.resolved(probe, addresses: addresses, now: at(10))
        guard case .connectTCP(probe, addresses, let timeout)? = tcp.last else {
            Issue.record("the probe connects: \(tcp)")
            return
        }
        #expect(timeout >= .seconds(1) && timeout <= .seconds(2), "a probe's TCP deadline is short")
        #expect(tcp.armedTimer?.deadline == at(10) + timeout)
    }

    /// Thousands of random events, most of them wrong for the state they
    /// arrive in: nothing traps, IDs are never reused, and a shutdown still
    /// ends it cleanly.
    @Test func randomEvents_neverCrashTheMachine() {
        var machine = makeMachine(endpoints: ["a.example:7000", "b.example:7000"], tls: true)
        var random = SplitMix64(seed: 42)
        var now = at(0)
        var attempts: [AttemptID] = []
        var timers: [LinkTimerID] = []
        var ignored = 0
        for _ in 0..<20_000 {
            now = now + .milliseconds(Int64.random(in: 0...3_000, using: &random))
            let attempt = attempts.randomElement(using: &random) ?? AttemptID.first
            let timer = timers.randomElement(using: &random) ?? LinkTimerID.first
            let code = WireCode(rawValue: UInt16.random(in: 1...11, using: &random))
            let actions: [LinkAction] =
                switch Int.random(in: 0..<21, using: &random) {
                case 0: machine.start(now: now)
                case 1: machine.userConnect(now: now)
                case 2: machine.userDisconnect(now: now)
                case 3: machine.userReconnect(now: now)
                case 4: machine.networkUp(now: now)
                case 5: machine.networkDown(now: now)
                case 6: machine.stageDeadlinePassed(timer, now: now)
                case 7: machine.backoffElapsed(timer, now: now)
                case 8: machine.tokenObtained(attempt, now: now)
                case 9: machine.resolved(attempt, addresses: addresses, now: now)
                case 10: machine.tcpConnected(attempt, now: now)
                case 11: machine.tlsEstablished(attempt, now: now)
                case 12: machine.stageFailed(attempt, stage: ConnectStage.allCases.randomElement(using: &random)!, reason: "x", now: now)
                case 13: machine.helloOK(attempt, hello, now: now)
                case 14: machine.loginOK(attempt, heartbeat: nil, now: now)
                case 15: machine.loginFail(attempt, code: code, retryAfter: .seconds(1), now: now)
                case 16: machine.goaway(attempt, code: code, retryAfter: nil, redirect: nil, now: now)
                case 17: machine.errorFrame(attempt, code: code, now: now)
                case 18: machine.protocolViolation(attempt, code: .protocolError, reason: "bad crc", now: now)
                case 19: machine.heartbeatTimedOut(attempt, now: now)
                default: machine.connectionClosed(attempt, reason: "reset", now: now)
                }
            for action in actions {
                switch action {
                case .obtainToken(let started, _): attempts.append(started)
                case .armTimer(let id, _, _): timers.append(id)
                case .ignored: ignored += 1
                default: break
                }
            }
        }
        #expect(ignored > 1_000, "most random events were wrong and were ignored deliberately")
        #expect(Set(attempts).count == attempts.count, "attempt IDs are never reused")
        #expect(Set(timers).count == timers.count, "timer IDs are never reused")
        #expect(attempts.count > 100)

        _ = machine.shutdown(now: now)
        if machine.phase == .disconnecting {
            _ = machine.connectionClosed(attempts.last!, reason: "closed by us", now: now)
        }
        #expect(machine.phase == .stopped(.shutdown))
    }

    @Test func endpointsParse_asTheConfigurationWritesThem() {
        #expect(Endpoint(parsing: "im.example.com:7000") == Endpoint(host: "im.example.com", port: 7000))
        #expect(Endpoint(parsing: "[2001:db8::1]:7443") == Endpoint(host: "2001:db8::1", port: 7443))
        #expect(Endpoint(parsing: "[2001:db8::1]:7443")?.description == "[2001:db8::1]:7443")
        for bad in ["im.example.com", "2001:db8::1:7443", ":7000", "host:0", "host:65536", "[::1]7443", "host:x"] {
            #expect(Endpoint(parsing: bad) == nil, "\(bad)")
        }
    }

}
