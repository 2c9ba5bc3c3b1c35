import Foundation
import IMAgentTestKit
import NIOCore
import RefServer
import Testing

@testable import IMAgentCore

/// The heartbeat on real links: the interval chosen over a fast and a slow
/// path, and NAT probing against a server that black-holes idle links.
/// Figures are printed, and only the policy's direction is asserted.
@Suite("Heartbeat on real links", .serialized, .timeLimit(.minutes(4)))
struct HeartbeatAdaptationTests {
    /// Connects through a delay proxy, keeps a session "open" (active mode,
    /// where quality scales the interval) and samples the interval.
    func intervals(oneWayDelay: TimeAmount, seconds: Double) async throws -> (rtt: Duration?, samples: [Duration]) {
        let scratch = try ScratchDirectory("hb")
        defer { scratch.cleanup() }
        let tokens = try scratch.write("tokens", "secret-1\n")
        let server = try await startServer(tokenFile: tokens)
        let proxy = try await DelayProxy.start(
            to: try SocketAddress(ipAddress: "127.0.0.1", port: server.port),
            oneWay: oneWayDelay
        )
        var configuration = testLinkConfiguration(endpoints: ["127.0.0.1:\(proxy.port)"], tokenFile: tokens)
        configuration.heartbeatMin = .seconds(1)
        configuration.heartbeatMax = .seconds(8)
        configuration.heartbeatProbeStep = .seconds(2)
        let (engine, recorder) = try startEngine(configuration)
        try await recorder.waitFor(timeout: 10, "LOGIN_OK through the proxy") { $0.isConnected }
        _ = try await engine.eventLoop.submit { engine.setSessionsActive(true) }.get()

        var samples: [Duration] = []
        let end = nowSeconds() + seconds
        while nowSeconds() < end {
            if let interval = await engine.status().heartbeatInterval, samples.last != interval {
                samples.append(interval)
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        let rtt = await engine.status().smoothedRTT
        await engine.shutdown()
        await proxy.stop()
        try await server.stop()
        return (rtt, samples)
    }

    @Test func intervalShrinks_onSlowPath() async throws {
        let fast = try await intervals(oneWayDelay: .microseconds(2500), seconds: 14)
        let slow = try await intervals(oneWayDelay: .milliseconds(200), seconds: 14)
        func show(_ values: [Duration]) -> String { values.map { "\($0)" }.joined(separator: " → ") }
        print("heartbeat interval at ~5 ms RTT (SRTT \(fast.rtt.map { "\($0)" } ?? "-")): \(show(fast.samples))")
        print("heartbeat interval at ~400 ms RTT (SRTT \(slow.rtt.map { "\($0)" } ?? "-")): \(show(slow.samples))")
        let fastLast = try #require(fast.samples.last)
        let slowLast = try #require(slow.samples.last)
        #expect(slowLast <= fastLast, "a fair path (400 ms) PINGs at most as far apart as an excellent one")
    }

    @Test func natProbing_convergesBelowTimeout() async throws {
        let scratch = try ScratchDirectory("nat")
        defer { scratch.cleanup() }
        let tokens = try scratch.write("tokens", "secret-1\n")
        let server = try await startServer(tokenFile: tokens)
        // Between two probe steps (4 s and 5 s, jittered ±10 %): a timeout on a step would
        // let a jittered 4 s interval live or die by chance.
        let natTimeout = 4.5
        #expect(await server.execute(line: "nat-timeout \(natTimeout)").hasPrefix("ok"))
        var configuration = testLinkConfiguration(endpoints: [server.address], tokenFile: tokens)
        configuration.heartbeatMin = .seconds(1)
        configuration.heartbeatMax = .seconds(10)
        configuration.heartbeatProbeStep = .seconds(1)
        configuration.reconnectHerdSpread = .milliseconds(200)
        let (engine, recorder) = try startEngine(configuration)
        try await recorder.waitFor(timeout: 10, "LOGIN_OK") { $0.isConnected }

        // Probing climbs 1 s → 2 s → … (3 answered PINGs per step) until an
        // idle gap reaches the black hole; then the link dies and the
        // interval is pinned. Watch until 8 s after the first death.
        var samples: [Duration] = []
        let end = nowSeconds() + 110
        var settleAt: Double?
        while nowSeconds() < min(end, settleAt ?? end) {
            if let interval = await engine.status().heartbeatInterval, samples.last != interval {
                samples.append(interval)
            }
            if settleAt == nil, let death = recorder.all.first(where: { $0.transition.leftConnected }) {
                settleAt = death.at + 8
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        let deaths = recorder.all.filter { $0.transition.leftConnected }.count
        print("NAT timeout \(natTimeout) s: intervals \(samples.map { "\($0)" }.joined(separator: " → ")); "
            + "\(deaths) links lost while probing")
        await engine.shutdown()
        try await server.stop()
        let last = try #require(samples.last)
        #expect(last < .seconds(natTimeout), "the pinned interval stays below the NAT timeout")
    }
}
