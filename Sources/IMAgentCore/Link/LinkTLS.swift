import NIOSSL

/// The client side of TLS for the link: TLS 1.2+, ALPN `imlink/1`, the
/// configured CA (or the system store), an optional client certificate,
/// verification on unless the configuration explicitly turns it off. The
/// context is built once, when the engine is created, so a bad file is a
/// configuration error rather than a failure at every attempt.
struct LinkTLS {
    static let alpn = "imlink/1"
    /// ALPN for an MQTT upstream (`[server] protocol = "mqtt"`), as brokers register it.
    static let mqttALPN = "mqtt"

    let context: NIOSSLContext
    let configuration: LinkConfiguration.TLS
    let configuredEndpoints: [Endpoint]

    /// The protocol ALPN offers (and the server must pick, if it picks any).
    let applicationProtocol: String

    init(_ configuration: LinkConfiguration.TLS, endpoints: [Endpoint], applicationProtocol: String = Self.alpn) throws(LinkConfigurationError) {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        tls.applicationProtocols = [applicationProtocol]
        self.applicationProtocol = applicationProtocol
        tls.certificateVerification = configuration.verifyPeer ? .fullVerification : .none
        if let caFile = configuration.caFile {
            tls.trustRoots = .file(caFile)
        }
        do {
            if let certificateFile = configuration.certificateFile, let keyFile = configuration.privateKeyFile {
                tls.certificateChain = try NIOSSLCertificate.fromPEMFile(certificateFile).map { .certificate($0) }
                tls.privateKey = .privateKey(try NIOSSLPrivateKey(file: keyFile, format: .pem))
            }
            self.context = try NIOSSLContext(configuration: tls)
        } catch {
            throw LinkConfigurationError("TLS setup failed: \(error)")
        }
        self.configuration = configuration
        self.configuredEndpoints = endpoints
    }

    /// The name for SNI and certificate verification: the configured server
    /// name for configured endpoints, else the endpoint's own host. An IP
    /// literal sends no SNI; NIOSSL then verifies the certificate against
    /// the peer's IP address.
    func serverName(for endpoint: Endpoint) -> String? {
        if let name = configuration.serverName, configuredEndpoints.contains(endpoint) {
            return name
        }
        return isIPLiteral(endpoint.host) ? nil : endpoint.host
    }

    func makeHandler(for endpoint: Endpoint) throws -> NIOSSLClientHandler {
        try NIOSSLClientHandler(context: context, serverHostname: serverName(for: endpoint))
    }
}
