import Foundation
import RefServer
import Testing

@testable import IMAgentCore

/// TLS with a CA made for the test: verification on, SNI and the verified
/// name from the configuration.
@Suite("LinkEngine over TLS", .serialized, .timeLimit(.minutes(1)))
struct LinkTLSTests {
    /// A CA and a server certificate for `imlink.test`, signed by it.
    struct Certificates {
        var ca: String
        var serverCertificate: String
        var serverKey: String
    }

    static func makeCertificates(in scratch: ScratchDirectory) throws -> Certificates {
        let dir = scratch.path
        let script = """
            set -e
            cd '\(dir)'
            openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.pem \
              -days 2 -subj '/CN=imagent test CA' \
              -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
            openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout server.key -out server.csr \
              -subj '/CN=imlink.test'
            printf 'subjectAltName=DNS:imlink.test\\nbasicConstraints=CA:FALSE\\nextendedKeyUsage=serverAuth\\n' > ext.cnf
            openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 -extfile ext.cnf
            """
        try #require(shell(script, quiet: true) == 0, "openssl could not make the test certificates")
        return Certificates(ca: dir + "/ca.pem", serverCertificate: dir + "/server.pem", serverKey: dir + "/server.key")
    }

    @Test func connectsWithVerification_andRefusesWrongServerName() async throws {
        let scratch = try ScratchDirectory("tls")
        defer { scratch.cleanup() }
        let certificates = try Self.makeCertificates(in: scratch)
        let tokens = try scratch.write("tokens", "secret-1\n")
        let server = try await startServer(
            tokenFile: tokens,
            tls: RefServerConfiguration.TLS(certificatePath: certificates.serverCertificate, privateKeyPath: certificates.serverKey)
        )

        var good = testLinkConfiguration(endpoints: [server.address], tokenFile: tokens)
        good.tls = LinkConfiguration.TLS(enabled: true, caFile: certificates.ca, serverName: "imlink.test")
        let (engine, recorder) = try startEngine(good)
        let connected = try await recorder.waitFor(timeout: 10, "LOGIN_OK over TLS") { $0.isConnected }
        #expect(recorder.all.contains { $0.transition.reason == "TLS established" })
        // The certificate is valid for 2 days (openssl -days 2): STATUS shows when it expires.
        let expires = try #require(await engine.status().serverCertificateNotAfterUnixMS)
        let inTwoDays = unixMilliseconds() + 2 * 86_400_000
        #expect(expires <= inTwoDays && expires > inTwoDays - 3_600_000, "expires \(expires), now \(unixMilliseconds())")
        print("TLS: verified imlink.test, connected to \(connected.transition.connectedEndpoint.map { "\($0)" } ?? "-")")
        await engine.shutdown()

        var wrong = good
        wrong.tls.serverName = "wrong.test"
        let (refused, refusedLog) = try startEngine(wrong)
        let failure = try await refusedLog.waitFor(timeout: 10, "TLS refusal") {
            if case .waitingToReconnect = $0.to { true } else { false }
        }
        print("TLS with the wrong server name: \(failure.transition.reason)")
        #expect(failure.transition.reason.contains("tls"))
        #expect(!refusedLog.all.contains { $0.transition.isConnected })
        await refused.shutdown()

        // Without the CA, the self-signed chain is not trusted either.
        var untrusted = good
        untrusted.tls.caFile = nil
        let (stranger, strangerLog) = try startEngine(untrusted)
        try await strangerLog.waitFor(timeout: 10, "TLS refusal without the CA") {
            if case .waitingToReconnect = $0.to { true } else { false }
        }
        #expect(!strangerLog.all.contains { $0.transition.isConnected })
        await stranger.shutdown()
        try await server.stop()
    }
}
