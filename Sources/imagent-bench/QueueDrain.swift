import AgentIPC
import NIOCore
import RefServer
import Synchronization

/// What happened between the server's start and the end of the drain.
struct DrainResult: Sendable {
    /// Server started → the daemon's link connected.
    var connect: Duration
    /// Link connected → the server has every queued message (and every live one sent so far).
    var drain: Duration
    /// imagentd's CPU over the drain, µs per queued message.
    var cpuPerMessage: Double?
    /// Send → echo of each live message, in milliseconds, sorted.
    var latencies: [Double]
    /// The first hop of each: send → ACCEPTED (the daemon stored it), in milliseconds, sorted;
    /// the rest of the echo is the link, the server and the echo's inbound commit.
    var acceptedLatencies: [Double]
    /// Highest VmRSS and RssAnon sampled during the drain, KiB.
    var peakRSS: Int
    var peakAnon: Int
    /// messages_in at the server at the end, and how many it should be.
    var received: Int
    var expected: Int
}

/// Polls the daemon's STATUS until its link is connected, then, while live `echo`
/// messages go out one at a time every `intervalMS` on `session`, polls the
/// in-process server until it has received `queued` messages plus every live one.
func measureDrain(server: RefServer, daemonPID: Int32, socketPath: String, live client: IPCClient, session: UInt64,
                  queued: Int, intervalMS: Int) async throws -> DrainResult {
    let clock = ContinuousClock()
    let serverUp = clock.now
    let status = try await IPCClient.connect(socketPath: socketPath, clientName: "imagent-bench-queue-status")
    defer { Task { await status.close() } }
    while try await !status.status().filter({ $0 != " " }).contains("\"state\":\"connected\"") {
        try await Task.sleep(for: .milliseconds(10))
    }
    let connected = clock.now
    let cpuAtConnect = cpuMicroseconds(of: daemonPID)
    let progress = LiveProgress()
    return try await withThrowingTaskGroup(of: [(total: Double, accepted: Double)].self) { group in
        group.addTask {
            try await liveEchoes(client: client, session: session, intervalMS: intervalMS, progress: progress)
        }
        var (peakRSS, peakAnon) = (0, 0)
        var received = 0
        while true {
            received = Int(jsonNumber("messages_in", in: await server.execute(.stats)) ?? "") ?? -1
            let memory = DaemonProcess.statusKiB(of: daemonPID, ["VmRSS", "RssAnon"])
            (peakRSS, peakAnon) = (max(peakRSS, memory[0]), max(peakAnon, memory[1]))
            if received >= queued + progress.sent.load(ordering: .acquiring) { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        let drained = clock.now
        let cpu = cpuMicroseconds(of: daemonPID).flatMap { end in cpuAtConnect.map { (end - $0) / Double(queued) } }
        progress.done.store(true, ordering: .releasing)
        guard let samples = try await group.next() else { throw BenchError("the live sender vanished") }
        let expected = queued + progress.sent.load(ordering: .acquiring)
        received = Int(jsonNumber("messages_in", in: await server.execute(.stats)) ?? "") ?? -1
        return DrainResult(connect: connected - serverUp, drain: drained - connected, cpuPerMessage: cpu,
                           latencies: samples.map(\.total).sorted(), acceptedLatencies: samples.map(\.accepted).sorted(), peakRSS: peakRSS, peakAnon: peakAnon,
                           received: received, expected: expected)
    }
}

/// One 64 B `echo` message at a time until `done`: send, wait for its echo, acknowledge it, pause.
/// Shared by the drain's monitor and the live sender.
private final class LiveProgress: Sendable {
    /// Set by the monitor when the drain is over.
    let done = Atomic<Bool>(false)
    /// Live messages sent so far.
    let sent = Atomic<Int>(0)
}

private func liveEchoes(client: IPCClient, session: UInt64, intervalMS: Int,
                        progress: LiveProgress) async throws -> [(total: Double, accepted: Double)] {
    let clock = ContinuousClock()
    let payload = ByteBuffer(repeating: 0x4C, count: 64)
    var events = client.events.makeAsyncIterator()
    var latencies: [(total: Double, accepted: Double)] = []
    while !progress.done.load(ordering: .acquiring) {
        let start = clock.now
        progress.sent.add(1, ordering: .releasing)
        _ = try await client.send(session: session, payload: payload)
        let accepted = clock.now
        echo: while true {
            switch try await events.next() {
            case .message(let message)? where message.session == session:
                try await client.ack(session: session, seq: message.seq)
                break echo
            case .error(let error)?:
                throw BenchError("daemon error on the live session \(error.code): \(error.message ?? "")")
            case nil:
                throw BenchError("the daemon closed the live client's connection")
            default:
                continue
            }
        }
        latencies.append(((clock.now - start).seconds * 1000, (accepted - start).seconds * 1000))
        if intervalMS > 0 { try await Task.sleep(for: .milliseconds(intervalMS)) }
    }
    return latencies
}
