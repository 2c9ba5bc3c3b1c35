import NIOSSL

/// The TLS context for `--tls-cert/--tls-key`: TLS 1.2 or later, ALPN `imlink/1` (`wire.md`).
enum TLSSetup {
    static let alpn = "imlink/1"

    static func makeContext(_ tls: RefServerConfiguration.TLS) throws -> NIOSSLContext {
        let chain = try NIOSSLCertificate.fromPEMFile(tls.certificatePath)
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: chain.map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: tls.privateKeyPath, format: .pem)))
        configuration.minimumTLSVersion = .tlsv12
        configuration.applicationProtocols = [alpn]
        return try NIOSSLContext(configuration: configuration)
    }
}
