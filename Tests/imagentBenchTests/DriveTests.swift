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
        // 7 once the forwarding task has run; the suite's parallel tests may starve it that long.
        #expect(error?.description.contains(" of 100 did") == true)
        #expect(clock.now - started < .seconds(60))
    }

    @Test func aRunThatCompletes_isNotCutShort() async throws {
        let result = try await drive(count: 50, window: 5, send: { _ in }, receive: { progress in
            for completed in stride(from: 10, through: 50, by: 10) {
                try await Task.sleep(for: .milliseconds(300))
                progress.yield(completed)
            }
            return .now
        })
        #expect(result.elapsed >= .milliseconds(1_500))
    }
}
