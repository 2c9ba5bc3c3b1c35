import Foundation
import IMAgentTestKit
import Testing

@testable import IMAgentCore

/// The engine's blocking helpers and the small additions to the cores.
@Suite("Link I/O parts")
struct LinkIOPartsTests {
    @Test func tokenFile_isTrimmed() throws {
        let scratch = try ScratchDirectory("token")
        defer { scratch.cleanup() }
        let path = try scratch.write("token", "  abc-123 \n\n")
        #expect(try TokenSource.file(path).read(timeout: .seconds(1)) == Array("abc-123".utf8))
    }

    @Test func tokenCommand_stdoutIsTheToken() throws {
        #expect(try TokenSource.command(["sh", "-c", "echo from-command"]).read(timeout: .seconds(5)) == Array("from-command".utf8))
    }

    @Test func tokenCommand_failsOnExitStatusAndDeadline() throws {
        #expect(throws: TokenError.self) { try TokenSource.command(["sh", "-c", "echo x; exit 3"]).read(timeout: .seconds(5)) }
        let start = Date()
        #expect(throws: TokenError.self) { try TokenSource.command(["sleep", "30"]).read(timeout: .milliseconds(300)) }
        #expect(Date().timeIntervalSince(start) < 5, "a hung command is killed at its deadline")
        #expect(throws: TokenError.self) { try TokenSource.command(["/nonexistent/token-helper"]).read(timeout: .seconds(1)) }
    }

    @Test func resolver_findsLoopback() throws {
        let addresses = try AddressResolution.resolve(Endpoint(host: "localhost", port: 7000))
        #expect(!addresses.isEmpty)
        #expect(addresses.allSatisfy { $0.port == 7000 && isIPLiteral($0.ip) })
        #expect(isIPLiteral("::1") && isIPLiteral("127.0.0.1") && !isIPLiteral("localhost"))
    }

    @Test func routeQuery_loopbackIsAlwaysRoutable() {
        #expect(RouteQuery.route(to: "127.0.0.1") != nil)
        let watcher = NetworkWatcher(endpoints: [Endpoint(host: "127.0.0.1", port: 1)], logger: testLogger("w")) { _ in }
        #expect(watcher?.check().reachable == true)
    }

    @Test func configuration_refusesNonsense() {
        var configuration = LinkConfiguration(endpoints: ["a:1"], token: .file("/dev/null"), agentID: "agent")
        #expect(throws: Never.self) { try configuration.validated() }
        configuration.endpoints = ["no-port"]
        #expect(throws: LinkConfigurationError.self) { try configuration.validated() }
        configuration.endpoints = ["a:1"]
        configuration.heartbeatMin = .seconds(10)
        configuration.heartbeatMax = .seconds(5)
        #expect(throws: LinkConfigurationError.self) { try configuration.validated() }
        configuration.heartbeatMax = .seconds(50)
        configuration.tls.certificateFile = "/x.pem"
        #expect(throws: LinkConfigurationError.self) { try configuration.validated() }
    }

    @Test func heartbeat_seededRTT_shortensFirstPongDeadline() {
        var policy = HeartbeatPolicy(random: SplitMix64(seed: 3))
        #expect(policy.rtt.pongDeadline == .seconds(15))
        policy.seedRTT(sample: .milliseconds(5))
        #expect(policy.rtt.smoothed == .milliseconds(5))
        #expect(policy.rtt.pongDeadline == .seconds(3))
    }
}

extension ProcessEnvironment {
    /// Sets CREDENTIALS_DIRECTORY, so it runs with the other environment tests (see `ProcessEnvironment`).
    @Suite struct TokenCredentialTests {
        @Test func tokenCredential_readsFromCredentialsDirectory() throws {
            let scratch = try ScratchDirectory("cred")
            defer { scratch.cleanup() }
            _ = try scratch.write("imlink-token", "cred-token\n")
            try withEnvironment(["CREDENTIALS_DIRECTORY": scratch.path]) { () throws in
                #expect(try TokenSource.credential("imlink-token").read(timeout: .seconds(1)) == Array("cred-token".utf8))
                #expect(throws: TokenError.self) { try TokenSource.credential("../etc/passwd").read(timeout: .seconds(1)) }
            }
        }
    }
}
