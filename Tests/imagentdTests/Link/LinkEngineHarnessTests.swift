import IMAgentTestKit
import Testing

@testable import IMAgentCore

/// The harness's promise to LinkEngineTests: an engine started by `withEngine`
/// is shut down however the test's body ends, so a failed wait leaves no
/// engine retrying into later tests.
@Suite("LinkEngine harness", .timeLimit(.minutes(1)))
struct LinkEngineHarnessTests {
    struct Failed: Error {}

    @Test func anEngineWhoseBodyThrows_isShutDown() async throws {
        let scratch = try ScratchDirectory()
        defer { scratch.cleanup() }
        let tokens = try scratch.write("tokens", "secret-1\n")
        // Nothing listens there: the engine keeps retrying until it is shut down.
        let configuration = testLinkConfiguration(endpoints: ["127.0.0.1:\(try freeLoopbackPort())"], tokenFile: tokens)
        var started: LinkEngine?
        await #expect(throws: Failed.self) {
            try await withEngine(configuration) { engine, recorder in
                started = engine
                try await recorder.waitFor(timeout: 5, "a first attempt") { $0.isAttemptStart }
                throw Failed()
            }
        }
        let engine = try #require(started)
        let status = await engine.status()
        #expect(status.state == "stopped" && status.detail.contains("shut down"), "\(status.state): \(status.detail)")
    }
}
