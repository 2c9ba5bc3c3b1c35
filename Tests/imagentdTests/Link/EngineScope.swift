import Synchronization
import Testing

@testable import imagentd

/// Shuts down every engine a test started (`startEngine`, `StartedEngines.register`)
/// however the test ends: a wait that fails halfway must not leave an engine
/// retrying in the background while the next tests run.
struct ShutsDownEngines: SuiteTrait, TestTrait, TestScoping {
    var isRecursive: Bool { true }

    func provideScope(for test: Test, testCase: Test.Case?,
                      performing function: @Sendable () async throws -> Void) async throws {
        // The suite's own scope passes through; each test gets a registry of its own.
        guard testCase != nil else { return try await function() }
        let started = StartedEngines()
        try await StartedEngines.$current.withValue(started) {
            do {
                try await function()
            } catch {
                await started.shutDownAll()
                throw error
            }
            await started.shutDownAll()
        }
    }
}

extension Trait where Self == ShutsDownEngines {
    static var shutsDownEngines: Self { ShutsDownEngines() }
}

/// The engines the current test started.
final class StartedEngines: Sendable {
    @TaskLocal static var current: StartedEngines?
    private let engines = Mutex<[LinkEngine]>([])

    /// Registers `engine` with the running test's scope, if it has one.
    static func register(_ engine: LinkEngine) {
        current?.engines.withLock { $0.append(engine) }
    }

    /// Shuts down the engines the test has not shut down itself (a second shutdown of
    /// the same engine is not supported: its thread pool is gone).
    func shutDownAll() async {
        for engine in engines.withLock({ $0 }) where await !engine.status().detail.contains("shut down") {
            await engine.shutdown()
        }
    }
}
