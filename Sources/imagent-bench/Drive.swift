import Synchronization

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

/// How long a run may go without a message completing before it counts as failed: the far
/// side lost what is missing (a bridge past its queue limit drops messages it acknowledged),
/// and waiting for them until the whole benchmark's time limit would stop every row after it.
let defaultStallLimit: Duration = .seconds(60)

/// Sends `count` messages with at most `window` of them not yet complete,
/// the same way for both paths: `send(i)` starts sending message i (and may
/// return before it is done); `receive` runs concurrently, yields the number
/// of completed messages into the continuation it is given, and returns the
/// instant the last one completed. A run in which nothing completes for
/// `stallLimit` fails, saying how many of `count` completed.
func drive(count: Int, window: Int, stallLimit: Duration = defaultStallLimit,
           send: (Int) async throws -> Void,
           receive: @escaping @Sendable (AsyncStream<Int>.Continuation) async throws -> ContinuousClock.Instant) async throws -> RunResult {
    let (reported, reporter) = AsyncStream.makeStream(of: Int.self, bufferingPolicy: .bufferingNewest(1))
    let (completions, progress) = AsyncStream.makeStream(of: Int.self, bufferingPolicy: .bufferingNewest(1))
    let watch = StallWatch()
    let clock = ContinuousClock()
    let start = clock.now
    return try await withThrowingTaskGroup(of: ContinuousClock.Instant?.self) { group in
        group.addTask {
            defer { reporter.finish() }
            return try await receive(reporter)
        }
        // Between the receiving side and the sender: notes when the count last moved.
        group.addTask {
            defer { progress.finish() }
            for await completed in reported {
                watch.moved(to: completed)
                progress.yield(completed)
            }
            return nil
        }
        group.addTask {
            while true {
                try await Task.sleep(for: .seconds(1))
                if let completed = watch.stalled(for: stallLimit) {
                    progress.finish()  // the sender stops waiting for room in its window
                    throw BenchError("no message completed for \(stallLimit): \(completed) of \(count) did; the rest were lost")
                }
            }
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
        while let finished = try await group.next() {
            if let end = finished {
                group.cancelAll()
                return RunResult(elapsed: end - start, latencies: latencies)
            }
        }
        throw BenchError("the receiving side vanished")
    }
}

/// The receiving side stopped before every message completed: its error (or the stall's), if there is one.
private func endedEarly(_ group: inout ThrowingTaskGroup<ContinuousClock.Instant?, any Error>) async throws -> RunResult {
    while try await group.next() != nil {}
    throw BenchError("the receiving side ended early")
}

/// When the count of completed messages last moved, shared by the forwarding and watching tasks.
private final class StallWatch: Sendable {
    private let state = Mutex((completed: 0, movedAt: ContinuousClock.now))

    func moved(to completed: Int) {
        state.withLock { $0 = (completed, ContinuousClock.now) }
    }

    /// The count completed, when it has not moved for `limit`.
    func stalled(for limit: Duration) -> Int? {
        state.withLock { ContinuousClock.now - $0.movedAt >= limit ? $0.completed : nil }
    }
}
