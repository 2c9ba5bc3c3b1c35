import IMAgentTestKit

/// One step of the schedule: a fault (or a quiet spell) applied while the load streams.
enum Fault: Sendable {
    case clean(seconds: Double)
    /// nftables `numgen random mod 100 < percent drop` on the server's veth, in and out.
    case loss(percent: Int, seconds: Double)
    /// Every packet dropped, both ways.
    case partition(seconds: Double)
    /// `ip link set … down`, then up; alternately the agent's end (the daemon's watcher sees it) and the server's.
    case flaps(count: Int, downSeconds: Double)
    /// `tc qdisc … tbf` on both ends.
    case thinPipe(rateKbit: Int, seconds: Double)
    /// The daemon moved onto the delay proxy (kill -9, start on `proxied.toml`) and back afterwards.
    case delay(DelayRange, seconds: Double)
    /// `kill -9` the reference server, start it again on the same port and `--state`.
    case serverKill
    /// `kill -9` the MQTT echo backend, start it again on the same client id (its session stays at the broker).
    case backendKill
    /// `kill -9` the daemon, start it again on the same store.
    case daemonKill
    /// `kill -9` a loadgen, start it again on its state file (a client detaching and attaching abruptly).
    case clientKill

    var name: String {
        switch self {
        case .clean: "clean"
        case .loss(let percent, _): "loss \(percent) %"
        case .partition: "partition"
        case .flaps(let count, let down): "\(count) link flaps (\(format(down)) s down)"
        case .thinPipe(let rate, _): "thin pipe (tbf \(rate) kbit/s)"
        case .delay(let range, _): "delay \(range.minMS)–\(range.maxMS) ms each way (proxy)"
        case .serverKill: "refserver kill -9 + restart"
        case .backendKill: "echo backend kill -9 + restart"
        case .daemonKill: "imagentd kill -9 + restart"
        case .clientKill: "loadgen kill -9 + restart"
        }
    }
}

/// What a run does: the load's shape and the schedule of faults.
struct ChaosPlan: Sendable {
    enum Mode: String, Sendable {
        case short
        case long
    }

    var mode: Mode
    var seed: UInt64
    var fleet: LoadFleet.Shape
    var schedule: [Fault]
    /// Long mode: the schedule repeats until this many messages each way were started.
    var repeatUntilMessages: Int?
    var timeLimitSeconds: Double

    /// About two to three minutes on two busy cores with debug builds; every kind of fault once.
    static func short(seed: UInt64, timeLimitSeconds: Double?) -> ChaosPlan {
        ChaosPlan(
            mode: .short, seed: seed,
            fleet: LoadFleet.Shape(slots: 4, sessions: 5, messagesPerSession: 1000, window: 16, reattachSeconds: 10,
                                   deadlineSeconds: 300, messageTarget: .max),
            schedule: standardSchedule(scale: 1),
            repeatUntilMessages: nil,
            timeLimitSeconds: timeLimitSeconds ?? 600)
    }

    /// The short mode against ejabberd, about a minute: one unacknowledged message at a time each
    /// way makes the broker slower than the daemon, so the load is smaller and the timed faults
    /// shorter (the partition still outlasts a silent link's detection); ejabberd's in-memory
    /// sessions make its own restart lossy, so the server-side fault is the echo backend's.
    static func shortEjabberd(seed: UInt64, timeLimitSeconds: Double?) -> ChaosPlan {
        ChaosPlan(
            mode: .short, seed: seed,
            fleet: LoadFleet.Shape(slots: 2, sessions: 3, messagesPerSession: 200, window: 8, reattachSeconds: 10,
                                   deadlineSeconds: 120, messageTarget: .max),
            schedule: [
                .clean(seconds: 3),
                .loss(percent: 30, seconds: 6),
                .loss(percent: 50, seconds: 6),
                .partition(seconds: 12),
                .flaps(count: 2, downSeconds: 2),
                .thinPipe(rateKbit: 128, seconds: 5),
                .backendKill,
                .daemonKill,
                .delay(DelayRange(minMS: 200, maxMS: 800), seconds: 6),
                .clientKill,
                .clean(seconds: 2),
            ],
            repeatUntilMessages: nil,
            timeLimitSeconds: timeLimitSeconds ?? 300)
    }

    /// At least `messages` each way (default 1,000,000): the schedule repeats until they are all started.
    static func long(messages: Int?, seed: UInt64, timeLimitSeconds: Double?) -> ChaosPlan {
        let target = messages ?? 1_000_000
        return ChaosPlan(
            mode: .long, seed: seed,
            fleet: LoadFleet.Shape(slots: 4, sessions: 5, messagesPerSession: 1000, window: 32, reattachSeconds: 30,
                                   deadlineSeconds: 1800, messageTarget: target),
            schedule: standardSchedule(scale: 2),
            repeatUntilMessages: target,
            timeLimitSeconds: timeLimitSeconds ?? 4 * 3600)
    }

    /// Every fault kind, with a clean spell first and last. `scale` stretches the timed faults.
    static func standardSchedule(scale: Double) -> [Fault] {
        [
            .clean(seconds: 10 * scale),
            .loss(percent: 30, seconds: 20 * scale),
            .loss(percent: 50, seconds: 20 * scale),
            // Longer than the daemon takes to call a silent link dead (heartbeat ≤ 2 s + 2 PONG deadlines).
            .partition(seconds: 12 * scale),
            .flaps(count: 3, downSeconds: 2),
            .thinPipe(rateKbit: 128, seconds: 15 * scale),
            .serverKill,
            .daemonKill,
            .delay(DelayRange(minMS: 200, maxMS: 800), seconds: 20 * scale),
            .clientKill,
            .clean(seconds: 5 * scale),
        ]
    }
}

func format(_ value: Double) -> String {
    value == value.rounded() ? String(Int(value)) : String(value)
}
