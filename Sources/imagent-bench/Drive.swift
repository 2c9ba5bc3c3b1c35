/// What one run of `count` messages measured.
struct RunResult: Sendable {
    /// From the first send until the run's last event (the last echo, or the server's ACK of the last message).
    var elapsed: Duration
    /// Send-to-echo time of each message; only when one message was in flight at a time.
    var latencies: [Duration]
}

/// What a run waits for: every message echoed by the `echo` service, or
/// acknowledged by the server's `sink` service (stored, nothing sent back).
enum Completion: String, Sendable {
    case echo
    case sink

    var service: String { rawValue }
}

/// Sends `count` messages with at most `window` of them not yet complete,
/// the same way for both paths: `send(i)` starts sending message i (and may
/// return before it is done); `receive` runs concurrently, yields the number
/// of completed messages into the continuation it is given, and returns the
/// instant the last one completed.
func drive(count: Int, window: Int,
           send: (Int) async throws -> Void,
           receive: @escaping @Sendable (AsyncStream<Int>.Continuation) async throws -> ContinuousClock.Instant) async throws -> RunResult {
    let (completions, progress) = AsyncStream.makeStream(of: Int.self, bufferingPolicy: .bufferingNewest(1))
    let clock = ContinuousClock()
    let start = clock.now
    return try await withThrowingTaskGroup(of: ContinuousClock.Instant.self) { group in
        group.addTask {
            defer { progress.finish() }
            return try await receive(progress)
        }
        var completed = 0
        var iterator = completions.makeAsyncIterator()
        var latencies: [Duration] = []
        for index in 0..<count {
            while index - completed >= window {
                guard let next = await iterator.next() else { return try await endedEarly(&group) }
                completed = next
            }
            let sent = clock.now
            try await send(index)
            if window == 1 {
                while completed <= index {
                    guard let next = await iterator.next() else { return try await endedEarly(&group) }
                    completed = next
                }
                latencies.append(clock.now - sent)
            }
        }
        guard let end = try await group.next() else { throw BenchError("the receiving side vanished") }
        return RunResult(elapsed: end - start, latencies: latencies)
    }
}

/// The receiving side stopped before every message completed: its error, if it has one.
private func endedEarly(_ group: inout ThrowingTaskGroup<ContinuousClock.Instant, any Error>) async throws -> RunResult {
    _ = try await group.next()
    throw BenchError("the receiving side ended early")
}
