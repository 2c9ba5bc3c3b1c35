import Foundation
import IMAgentTestKit
import Testing

/// `imagentd --check-config` on `[metrics] prometheus_listen` (imagentd.toml(5), imagentd(8)
/// SECURITY): an address off loopback is refused with its line unless allowed explicitly.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct PrometheusListenTrustTests {
    private func check(_ metrics: String) async throws -> (file: String, result: ImagentProcess.Result) {
        let directory = try FakeDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/metrics.toml"
        try """
            [server]
            endpoints = ["127.0.0.1:7443"]
            [auth]
            token_file = "\(directory)/token"
            [metrics]
            \(metrics)
            """.write(toFile: file, atomically: true, encoding: .utf8)
        try "token\n".write(toFile: directory + "/token", atomically: true, encoding: .utf8)
        return (file, try await run(RealDaemon.binary, ["--check-config", file]))
    }

    @Test func anyAddress_isRefusedWithItsLine() async throws {
        let (file, checked) = try await check("prometheus_listen = \"0.0.0.0:9464\"")
        #expect(checked.status == 78, "\(checked.stderr)")
        #expect(checked.stderr.contains("\(file):6: metrics.prometheus_listen: \"0.0.0.0:9464\" is not a loopback address"), "\(checked.stderr)")
    }

    @Test func anyAddress_withTheAllowKey_passesWithAWarning() async throws {
        let (file, checked) = try await check("prometheus_listen = \"0.0.0.0:9464\"\nprometheus_allow_remote = true")
        #expect(checked.status == 0, "\(checked.stderr)")
        #expect(checked.stderr.contains("\(file): warning: [metrics] prometheus_allow_remote = true"), "\(checked.stderr)")
    }

    @Test func loopback_passesWithoutAWord() async throws {
        let (_, checked) = try await check("prometheus_listen = \"127.0.0.1:9464\"")
        #expect(checked.status == 0, "\(checked.stderr)")
        #expect(!checked.stderr.contains("prometheus"), "\(checked.stderr)")
    }
}
