import Foundation
import IMAgentTestKit
import IMLink
import NIOCore
import NIOSSL
import RefServer
import Testing

@Suite("TLS", .timeLimit(.minutes(1)))
struct TLSTests {
    /// A throw-away self-signed certificate made by the openssl command.
    static func makeCertificate(in environment: TestEnvironment) throws -> RefServerConfiguration.TLS {
        let tls = RefServerConfiguration.TLS(certificatePath: environment.directory + "/cert.pem",
                                             privateKeyPath: environment.directory + "/key.pem")
        let process = try ChildProcess(executable: "/usr/bin/openssl",
                                       arguments: ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                                                   "-nodes", "-keyout", tls.privateKeyPath, "-out", tls.certificatePath,
                                                   "-days", "1", "-subj", "/CN=localhost"],
                                       stderr: .null)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "openssl could not make a certificate")
        return tls
    }

    @Test("with a certificate and key, the server speaks IMLink inside TLS with ALPN imlink/1")
    func tls_handshakeWithALPN() async throws {
        let environment = try TestEnvironment.make()
        defer { environment.remove() }
        let tls = try Self.makeCertificate(in: environment)
        try await withRefServer(environment: environment, configure: { configuration, _ in
            configuration.tls = tls
        }) { server, _ in
            var clientTLS = TLSConfiguration.makeClientConfiguration()
            clientTLS.certificateVerification = .none
            clientTLS.applicationProtocols = ["imlink/1"]
            let client = try await TestClient.connect(port: server.port, tls: try NIOSSLContext(configuration: clientTLS))
            try await client.handshake(agentID: "agent-tls")
            #expect(try await client.negotiatedProtocol == "imlink/1")
            try await client.open(1, service: "echo")
            try await client.sendData(1, seq: 1, "secret")
            let frames = try await collect(client) { $0.dataSeqs.count == 1 && $0.acks == [1] }
            #expect(frames.payloads == ["secret"])
            await client.close()
        }
    }
}
