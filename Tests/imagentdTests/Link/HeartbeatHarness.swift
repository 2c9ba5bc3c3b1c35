import IMAgentTestKit
@testable import IMAgentCore

typealias Heartbeat = HeartbeatPolicy<SplitMix64>

/// Runs a `HeartbeatPolicy` against a simulated path: the server answers
/// every PING after `rtt`, unless the test drops it or the NAT forgot the
/// flow (silent for `natTimeout` or longer, after which nothing gets through
/// until the link is replaced, 5 s later).
struct HeartbeatHarness {
    var policy: Heartbeat
    var now = at(0)
    let rtt: Duration
    let natTimeout: Duration?
    var serverCeiling: Duration?
    /// PINGs still to drop (the PONG never comes).
    var pingsToDrop = 0
    private(set) var timer: (id: Heartbeat.TimerID, deadline: MonotonicInstant)?
    private var lastTraffic = at(0)
    private var natForgotFlow = false
    private(set) var deaths: [MonotonicInstant] = []
    /// Every PING's instant and the silence before it.
    private(set) var pings: [(at: MonotonicInstant, gap: Duration)] = []

    init(
        configuration: Heartbeat.Configuration = Heartbeat.Configuration(),
        rtt: Duration,
        natTimeout: Duration? = nil,
        serverCeiling: Duration? = nil,
        seed: UInt64 = 1
    ) {
        self.policy = Heartbeat(configuration: configuration, random: SplitMix64(seed: seed))
        self.rtt = rtt
        self.natTimeout = natTimeout
        self.serverCeiling = serverCeiling
        apply(policy.linkEstablished(serverCeiling: serverCeiling, now: now))
    }

    mutating func run(for duration: Duration) {
        let end = now + duration
        while let timer, timer.deadline < end {
            now = timer.deadline
            apply(policy.timerFired(timer.id, now: now))
        }
        now = end
    }

    mutating func apply(_ action: Heartbeat.Action) {
        switch action {
        case .none:
            break
        case .armTimer(let id, let deadline):
            timer = (id, deadline)
        case .sendPing(let id, let timerID, let pongDeadline):
            let gap = now - lastTraffic
            pings.append((now, gap))
            timer = (timerID, pongDeadline)
            if let natTimeout, gap >= natTimeout { natForgotFlow = true }
            guard !natForgotFlow else { return }
            guard pingsToDrop == 0 else {
                pingsToDrop -= 1
                return
            }
            now = now + rtt
            lastTraffic = now
            apply(policy.pongReceived(id: id, now: now))
        case .linkDead:
            deaths.append(now)
            now = now + .seconds(5)
            natForgotFlow = false
            lastTraffic = now
            apply(policy.linkEstablished(serverCeiling: serverCeiling, now: now))
        }
    }
}
