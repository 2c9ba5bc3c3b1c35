import IMAgentTestKit
import IMLink
import Testing

@testable import IMAgentCore

/// Issue 12's storm: 10,000 agents behind one path that dies for 5 minutes
/// and heals at one instant, a server admitting 1,000 LOGINs a second and
/// answering the rest with LOGIN_FAIL OVERLOADED and a RETRY_AFTER_MS.
/// Each agent is a real `LinkStateMachine` on the fake clock; the simulated
/// path drops everything until the heal and carries each packet in half of
/// `rtt` after it; each TCP connect sends its SYN at once and again after
/// 1 s, 3 s, 7 s… (the kernel's retransmission) until the stage's deadline.
@Suite(.timeLimit(.minutes(5))) struct PartitionStormTests {
    @Test func tenThousandAgents_afterAFiveMinutePartition_comeBackAtTheServersPace() async {
        // Minutes of CPU in a debug build: off the cooperative pool, which the other tests share.
        let report = await onOwnThread {
            var storm = PartitionStorm(agents: 10_000, partition: .seconds(300), admissionPerSecond: 1_000)
            storm.run()
            return storm.report
        }
        print(report.summary)

        #expect(report.loggedIn == 10_000, "every agent is back")
        #expect(report.allBackAfter <= .seconds(15), "the whole fleet within 15 s of the heal: \(report.allBackAfter)")
        let afterFirst = report.loginsPerSecond.dropFirst()
        #expect(afterFirst.allSatisfy { $0 <= 1_500 }, "after the first second ≤ 1.5 × admission: \(report.loginsPerSecond)")
        #expect(report.longestWaitBeyondRetryAfter <= .seconds(2), "back within RETRY_AFTER + 2 s: \(report.longestWaitBeyondRetryAfter)")
        #expect(report.firstSYNAfterHeal <= .milliseconds(1_200), "a probe was in flight: \(report.firstSYNAfterHeal)")
        #expect(report.windowsGrown == 0, "five minutes of silence grew no agent's backoff window")
    }
}

/// The simulation behind `PartitionStormTests`.
struct PartitionStorm {
    struct Report {
        var connectsPerSecond: [Int]
        var loginsPerSecond: [Int]
        var admittedPerSecond: [Int]
        var synsLostInPartition: Int
        var loggedIn: Int
        var allBackAfter: Duration
        var longestWaitBeyondRetryAfter: Duration
        var firstSYNAfterHeal: Duration
        var windowsGrown: Int

        var summary: String {
            """
            partition storm: \(loggedIn) agents back, the last \(allBackAfter) after the heal; \
            \(synsLostInPartition) SYNs lost in the partition; \
            latest SYN after the heal \(firstSYNAfterHeal); \
            longest wait beyond RETRY_AFTER \(longestWaitBeyondRetryAfter)
            per second after the heal — TCP connects: \(connectsPerSecond); LOGINs: \(loginsPerSecond); admitted: \(admittedPerSecond)
            """
        }
    }

    private enum NetworkEvent {
        case death(AttemptID)
        case synAck(AttemptID)
        case helloOK(AttemptID)
        case loginArrives(AttemptID)
        case loginOK(AttemptID)
        case overloaded(AttemptID, retryAfter: Duration)
    }

    private struct Agent {
        var machine: Machine
        var timer: (id: LinkTimerID, deadline: MonotonicInstant, purpose: LinkTimerPurpose)?
        var network: (at: MonotonicInstant, event: NetworkEvent)?
        var generation = 0
        var loggedInAt: MonotonicInstant?
        var lastRetryAfter: (received: MonotonicInstant, delay: Duration)?
        var lastSYN: MonotonicInstant?

        var next: MonotonicInstant? {
            switch (timer?.deadline, network?.at) {
            case (let t?, let n?): min(t, n)
            case (let t?, nil): t
            case (nil, let n?): n
            case (nil, nil): nil
            }
        }
    }

    let heal: MonotonicInstant
    let rtt = Duration.milliseconds(20)
    let admissionPerSecond: Int
    /// The server's RETRY_AFTER_MS: its queue position at the admission
    /// rate, never earlier than this (the herd of the first second must
    /// have passed before the first of them come back).
    let minimumRetryAfter = Duration.seconds(2)
    private var agents: [Agent] = []
    private var queue = EventHeap()
    private var random = SplitMix64(seed: 12)
    // The server.
    private var tokens: Double
    private var tokensAt: MonotonicInstant
    private var nextSlot: MonotonicInstant
    private var connects = [Int](repeating: 0, count: 60)
    private var logins = [Int](repeating: 0, count: 60)
    private var admitted = [Int](repeating: 0, count: 60)
    private var synsLost = 0
    private var longestBeyond = Duration.zero
    private var latestFirstSYN = Duration.zero
    private var windowsGrownAtHeal: Int?

    init(agents count: Int, partition: Duration, admissionPerSecond: Int) {
        heal = at(0) + partition
        self.admissionPerSecond = admissionPerSecond
        tokens = 0
        tokensAt = heal
        nextSlot = heal
        for index in 0..<count {
            var machine = makeMachine(seed: UInt64(index) &* 0x9E37_79B9 &+ 7)
            let attempt = connectedMachine(&machine, now: at(-3600))
            // The heartbeat (or an overdue ACK) finds the link dead within 30 s of the cut.
            let death = at(0) + Duration.random(in: .zero...(.seconds(30)), using: &random)
            agents.append(Agent(machine: machine, network: (death, .death(attempt))))
            queue.push(death, agent: index, generation: 0)
        }
    }

    var report: Report {
        let back = agents.compactMap(\.loggedInAt)
        return Report(
            connectsPerSecond: Self.trimmed(connects),
            loginsPerSecond: Self.trimmed(logins),
            admittedPerSecond: Self.trimmed(admitted),
            synsLostInPartition: synsLost,
            loggedIn: back.count,
            allBackAfter: (back.max() ?? heal) - heal,
            longestWaitBeyondRetryAfter: longestBeyond,
            firstSYNAfterHeal: latestFirstSYN,
            windowsGrown: windowsGrownAtHeal ?? -1
        )
    }

    mutating func run() {
        while let (now, index, generation) = queue.pop() {
            guard agents[index].generation == generation else { continue }
            if now >= heal, windowsGrownAtHeal == nil {
                windowsGrownAtHeal = agents.filter { $0.machine.reconnectPolicy.window > .seconds(2) }.count
            }
            if let network = agents[index].network, network.at == now {
                agents[index].network = nil
                handle(network.event, agent: index, now: now)
            } else if let timer = agents[index].timer, timer.deadline == now {
                agents[index].timer = nil
                switch timer.purpose {
                case .stageDeadline: perform(agents[index].machine.stageDeadlinePassed(timer.id, now: now), agent: index, now: now)
                case .backoff: perform(agents[index].machine.backoffElapsed(timer.id, now: now), agent: index, now: now)
                }
            }
            agents[index].generation += 1
            if let next = agents[index].next {
                queue.push(next, agent: index, generation: agents[index].generation)
            }
        }
    }

    private mutating func handle(_ event: NetworkEvent, agent index: Int, now: MonotonicInstant) {
        switch event {
        case .death(let attempt):
            perform(agents[index].machine.heartbeatTimedOut(attempt, now: now), agent: index, now: now)
        case .synAck(let attempt):
            perform(agents[index].machine.tcpConnected(attempt, now: now), agent: index, now: now)
        case .helloOK(let attempt):
            perform(agents[index].machine.helloOK(attempt, hello, now: now), agent: index, now: now)
        case .loginArrives(let attempt):
            serverReceivesLogin(attempt, from: index, now: now)
        case .loginOK(let attempt):
            agents[index].loggedInAt = now
            perform(agents[index].machine.loginOK(attempt, heartbeat: nil, now: now), agent: index, now: now)
        case .overloaded(let attempt, let retryAfter):
            agents[index].lastRetryAfter = (now, retryAfter)
            perform(agents[index].machine.loginFail(attempt, code: .overloaded, retryAfter: retryAfter, now: now), agent: index, now: now)
        }
    }

    /// Performs the actions like the engine does, in order; an action that
    /// completes at once (a cached token, an IP literal, our own close)
    /// feeds its event back and its actions run after the current list.
    private mutating func perform(_ actions: [LinkAction], agent index: Int, now: MonotonicInstant) {
        var pending = actions[...]
        while let action = pending.popFirst() {
            var more: [LinkAction] = []
            switch action {
            case .obtainToken(let attempt, _):
                more = agents[index].machine.tokenObtained(attempt, now: now)
            case .resolve(let attempt, _):
                more = agents[index].machine.resolved(attempt, addresses: addresses, now: now)
            case .connectTCP(let attempt, _, let timeout):
                connect(attempt, agent: index, timeout: timeout, now: now)
            case .sendHello(let attempt):
                agents[index].network = (now + rtt, .helloOK(attempt))
            case .sendLogin(let attempt):
                agents[index].network = (now + rtt / 2, .loginArrives(attempt))
            case .closeConnection(let attempt, _):
                agents[index].network = nil
                more = agents[index].machine.connectionClosed(attempt, reason: "closed", now: now)
            case .armTimer(let id, let deadline, let purpose):
                agents[index].timer = (id, deadline, purpose)
            case .cancelTimer(let id):
                if agents[index].timer?.id == id { agents[index].timer = nil }
            case .startTLS, .startHeartbeat, .reopenSessions, .abandonAttempt, .checkTokenChanged, .stateChanged, .ignored:
                break
            }
            pending.append(contentsOf: more)
        }
    }

    /// The SYNs of one connect: lost before the heal; the first after it is
    /// answered, unless the stage's deadline came first.
    private mutating func connect(_ attempt: AttemptID, agent index: Int, timeout: Duration, now: MonotonicInstant) {
        var offset = Duration.zero
        var retransmit = Duration.seconds(1)
        while offset < timeout {
            let syn = now + offset
            if syn >= heal {
                if agents[index].lastSYN == nil || agents[index].lastSYN! < heal {
                    latestFirstSYN = max(latestFirstSYN, syn - heal)
                }
                agents[index].lastSYN = syn
                count(&connects, at: syn + rtt / 2)
                agents[index].network = (syn + rtt, .synAck(attempt))
                return
            }
            synsLost += 1
            agents[index].lastSYN = syn
            offset += retransmit
            retransmit *= 2
        }
    }

    private mutating func serverReceivesLogin(_ attempt: AttemptID, from index: Int, now: MonotonicInstant) {
        count(&logins, at: now)
        if let (received, delay) = agents[index].lastRetryAfter {
            longestBeyond = max(longestBeyond, now - received - delay)
        }
        let rate = Double(admissionPerSecond)
        tokens = min(rate / 10, tokens + rate * (now - tokensAt).seconds)
        tokensAt = now
        if tokens >= 1 {
            tokens -= 1
            count(&admitted, at: now)
            agents[index].network = (now + rtt / 2, .loginOK(attempt))
            return
        }
        // Come back at your place in the queue, one per 1/rate.
        nextSlot = max(nextSlot, now + minimumRetryAfter)
        let retryAfter = Duration.milliseconds(((nextSlot - now).seconds * 1000).rounded(.up))
        nextSlot = nextSlot + .seconds(1 / rate)
        agents[index].network = (now + rtt / 2, .overloaded(attempt, retryAfter: retryAfter))
    }

    private func count(_ buckets: inout [Int], at instant: MonotonicInstant) {
        guard instant >= heal else { return }
        let second = Int((instant - heal).seconds)
        if second < buckets.count { buckets[second] += 1 }
    }

    private static func trimmed(_ buckets: [Int]) -> [Int] {
        Array(buckets.prefix(through: buckets.lastIndex { $0 > 0 } ?? 0))
    }
}

/// A binary min-heap of agents' next instants.
struct EventHeap {
    private var items: [(at: MonotonicInstant, agent: Int, generation: Int)] = []

    mutating func push(_ at: MonotonicInstant, agent: Int, generation: Int) {
        items.append((at, agent, generation))
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard items[child].at < items[parent].at else { break }
            items.swapAt(child, parent)
            child = parent
        }
    }

    mutating func pop() -> (MonotonicInstant, Int, Int)? {
        guard !items.isEmpty else { return nil }
        items.swapAt(0, items.count - 1)
        let top = items.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < items.count, items[left].at < items[smallest].at { smallest = left }
            if right < items.count, items[right].at < items[smallest].at { smallest = right }
            guard smallest != parent else { break }
            items.swapAt(parent, smallest)
            parent = smallest
        }
        return (top.at, top.agent, top.generation)
    }
}
