import Testing

@testable import IMAgentCore

/// The worst case behind `LinkEngineTests.reconnects_whenServerRestarts`,
/// pinned with the fake clock: the server closes the established link
/// (server refusing: the herd spread), every attempt while it is down is
/// refused (full jitter, the window grows to the cap), and the server comes
/// back at any instant. The next attempt then starts at most one capped
/// delay after that instant, whatever the draws.
@Suite struct ServerRestartBoundTests {
    /// The reconnect settings the restart test configures: a short cap, so
    /// that a few attempts fail while the server is down.
    static let restartReconnect = ReconnectPolicy.Configuration(
        base: .milliseconds(100),
        cap: .milliseconds(250),
        herdSpread: .milliseconds(250)
    )
    @Test func serverClosedThenRefusing_nextAttemptWithinTheCapOfTheServerComingBack() throws {
        let configuration = Self.restartReconnect
        var worstWait = Duration.zero
        var worstFirst = Duration.zero
        for seed in UInt64(1)...200 {
            var machine = makeMachine(reconnect: configuration, seed: seed)
            let link = connectedMachine(&machine, now: at(0))
            let lost = machine.connectionClosed(link, reason: "closed by the server", now: at(5))
            #expect(!machine.probing, "a link closed by the server is a refusal, not a silent path")
            var backoff = try #require(lost.armedTimer)
            worstFirst = max(worstFirst, backoff.deadline - at(5))
            #expect(backoff.deadline - at(5) >= configuration.base)
            // Refused attempts for a while; the server comes back at the
            // instant an attempt is refused (the worst moment: a whole
            // delay is still ahead).
            for _ in 0..<12 {
                let now = backoff.deadline
                let attempt = try #require(machine.backoffElapsed(backoff.id, now: now).startedAttempt)
                _ = machine.tokenObtained(attempt, now: now)
                _ = machine.resolved(attempt, addresses: addresses, now: now)
                let refused = machine.stageFailed(attempt, stage: .tcp, reason: "connection refused", now: now)
                backoff = try #require(refused.armedTimer)
                #expect(backoff.purpose == .backoff)
                let wait = backoff.deadline - now
                #expect(wait >= configuration.base && wait <= configuration.cap, "seed \(seed): \(wait)")
                worstWait = max(worstWait, wait)
            }
            #expect(machine.reconnectPolicy.window == configuration.cap)
        }
        #expect(worstFirst <= configuration.herdSpread)
        // The bound is the cap itself: it is reached (within 5 %), never passed.
        #expect(worstWait <= configuration.cap && worstWait >= configuration.cap * 0.95, "\(worstWait)")
    }
}
