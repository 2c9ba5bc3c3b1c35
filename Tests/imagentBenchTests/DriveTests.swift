import Synchronization
import Testing

@testable import imagent_bench

/// A run whose far side stops completing messages fails with what it got, instead of
/// waiting for the rest until the benchmark's time limit (a bridge past its queue limit
/// drops messages it acknowledged; `compare` then stopped at that row).
@Suite struct DriveTests {
    @Test func aRunThatStopsCompleting_failsAfterTheStallLimit_sayingHowManyDid() async throws {
        let clock = ContinuousClock()
        let started = clock.now
        let error = await #expect(throws: BenchError.self) {
            try await drive(count: 100, window: 10, stallLimit: .seconds(5), send: { _ in }, receive: { progress in
                progress.yield(7)
                try await Task.sleep(for: .seconds(3_600))  // lost the rest; cancelled when the run fails
                return .now
            })
        }
        let elapsed = clock.now - started
        // The count the receiving side reported: 7 once the forwarding task has run (the suite's
        // parallel tests may starve it that long), 0 before.
        let description = error?.description ?? ""
        #expect(description.contains("no message completed for 5.0 seconds: 7 of 100 did")
                    || description.contains("no message completed for 5.0 seconds: 0 of 100 did"), "\(description)")
        // Not before the stall limit; the watch looks once a second, so within a few seconds after it.
        #expect(elapsed >= .seconds(5) && elapsed < .seconds(60), "failed after \(elapsed)")
    }

    @Test func aRunThatCompletes_isNotCutShort() async throws {
        // What the receiving side has reported before each SEND: the window of 5 holds the sender back.
        let seen = SeenProgress()
        let clock = ContinuousClock()
        let started = clock.now
        let result = try await drive(count: 50, window: 5, send: { _ in
            seen.completedBeforeSend.withLock { $0.append(seen.reported.withLock { $0 }) }
        }, receive: { progress in
            for completed in stride(from: 10, through: 50, by: 10) {
                try await Task.sleep(for: .milliseconds(300))
                seen.reported.withLock { $0 = completed }
                progress.yield(completed)
            }
            return .now
        })
        let wall = clock.now - started
        let sends = seen.completedBeforeSend.withLock { $0 }
        #expect(sends.count == 50, "every message is sent once")
        for (index, completed) in sends.enumerated() {
            #expect(index - completed < 5, "SEND \(index) went with only \(completed) completed")
        }
        // Five steps of 300 ms: the run ends at the receiving side's last report, not before it, and within the call.
        #expect(result.elapsed >= .milliseconds(1_500) && result.elapsed <= wall, "\(result.elapsed) of a call of \(wall)")
        #expect(result.latencies.isEmpty, "latencies are measured with a window of 1 only")
    }
}

/// What the receiving side of a run has reported so far, and what it had reported at each SEND.
private final class SeenProgress: Sendable {
    let reported = Mutex(0)
    let completedBeforeSend = Mutex<[Int]>([])
}
