import IMAgentTestKit
@testable import IMAgentCore

/// The fake clock: an instant `seconds` after the origin.
func at(_ seconds: Double) -> MonotonicInstant {
    MonotonicInstant(sinceOrigin: .seconds(seconds))
}

typealias Machine = LinkStateMachine<SplitMix64>

func makeMachine(
    endpoints: [String] = ["a.example:7000"],
    tls: Bool = false,
    reconnect: ReconnectPolicy.Configuration = ReconnectPolicy.Configuration(),
    seed: UInt64 = 1
) -> Machine {
    let configuration = Machine.Configuration(
        endpoints: endpoints.map { Endpoint(parsing: $0)! },
        tls: tls,
        reconnect: reconnect
    )
    return Machine(configuration: configuration, random: SplitMix64(seed: seed))
}

let hello = HelloResult(version: 1, features: [.flow], maxFrame: 1 << 20)
let addresses = [ResolvedAddress(ip: "192.0.2.1", port: 7000)]

extension Array where Element == LinkAction {
    /// The attempt an `obtainToken` in these actions started.
    var startedAttempt: AttemptID? {
        for case .obtainToken(let attempt, _) in self { return attempt }
        return nil
    }

    /// The timer these actions arm, if any.
    var armedTimer: (id: LinkTimerID, deadline: MonotonicInstant, purpose: LinkTimerPurpose)? {
        for case .armTimer(let id, let deadline, let purpose) in self { return (id, deadline, purpose) }
        return nil
    }

    /// The phase the last state change in these actions entered.
    var enteredPhase: LinkPhase? {
        var phase: LinkPhase?
        for case .stateChanged(_, let to, _) in self { phase = to }
        return phase
    }

    var isIgnored: Bool {
        guard count == 1, case .ignored = self[0] else { return false }
        return true
    }
}

/// Walks the attempt `machine` is in (at its token stage) to LOGIN_OK.
func completeAttempt(_ attempt: AttemptID, on machine: inout Machine, now: MonotonicInstant) {
    _ = machine.tokenObtained(attempt, now: now)
    _ = machine.resolved(attempt, addresses: addresses, now: now)
    _ = machine.tcpConnected(attempt, now: now)
    if machine.configuration.tls {
        _ = machine.tlsEstablished(attempt, now: now)
    }
    _ = machine.helloOK(attempt, hello, now: now)
    _ = machine.loginOK(attempt, heartbeat: nil, now: now)
}

/// A machine started and connected at `now`; returns the attempt.
func connectedMachine(_ machine: inout Machine, now: MonotonicInstant) -> AttemptID {
    let attempt = machine.start(now: now).startedAttempt!
    completeAttempt(attempt, on: &machine, now: now)
    return attempt
}

/// A machine started at 0 whose attempt has had HELLO_OK: the next step is LOGIN.
func startAndReachLogin(_ machine: inout Machine) -> AttemptID {
    let attempt = machine.start(now: at(0)).startedAttempt!
    _ = machine.tokenObtained(attempt, now: at(0))
    _ = machine.resolved(attempt, addresses: addresses, now: at(0))
    _ = machine.tcpConnected(attempt, now: at(0))
    _ = machine.helloOK(attempt, hello, now: at(0))
    return attempt
}
