import Testing

@testable import IMAgentCore

/// TLS by default; plaintext off the host only when the operator says so
/// (finding 2 of the trust-boundaries review).
@Suite struct PlaintextConfigTests {
    @Test func tlsIsOnByDefault() throws {
        #expect(DaemonConfiguration().server.tls.enabled)
        let c = try ConfigLoader.load(text: "[server]\nendpoints = [\"im.example.net:7443\"]\n", file: "f")
        #expect(c.server.tls.enabled)
        #expect(LinkConfiguration(c).tls.enabled)
    }

    @Test func plaintextToANonLoopbackEndpoint_isAConfigError_withItsLine() {
        let text = "[server]\nendpoints = [\"127.0.0.1:7000\", \"im.example.net:7443\"]\ntls = false\n"
        do {
            _ = try ConfigLoader.load(text: text, file: "/etc/imagent/imagentd.toml")
            Issue.record("accepted plaintext to im.example.net")
        } catch {
            #expect(error.description.hasPrefix("/etc/imagent/imagentd.toml:3: server: TLS is off and \"im.example.net:7443\" is not a loopback address"), "\(error)")
            #expect(error.description.contains("allow_plaintext = true"))
        }
        let table = "[server]\nendpoints = [\"[2001:db8::1]:7443\"]\n[server.tls]\nenabled = false\n"
        #expect(throws: ConfigProblems.self) { try ConfigLoader.load(text: table, file: "f") }
    }

    @Test func plaintextToLoopback_needsNoConsent() throws {
        for host in ["127.0.0.1:7000", "127.3.4.5:7000", "[::1]:7000", "localhost:7000"] {
            let c = try ConfigLoader.load(text: "[server]\nendpoints = [\"\(host)\"]\ntls = false\n", file: "f")
            #expect(!c.server.tls.enabled)
            #expect(SecurityWarnings.of(c).isEmpty, "\(host)")
        }
        #expect(Endpoint(parsing: "127.evil.net:1")?.isLoopback == false)
        #expect(Endpoint(parsing: "1270.0.0.1:1")?.isLoopback == false)
    }

    @Test func aRedirectAllowedOffTheHost_needsTLSOrConsentToo() throws {
        let text = "[server]\nendpoints = [\"127.0.0.1:7000\"]\ntls = false\nredirect_allow = [\"127.0.0.2\", \"*.example.net\"]\n"
        do {
            _ = try ConfigLoader.load(text: text, file: "f")
            Issue.record("accepted a plaintext redirect off the host")
        } catch {
            #expect(error.description.hasPrefix("f:4: server.redirect_allow: \"*.example.net\" would receive the token in the clear"), "\(error)")
        }
        _ = try ConfigLoader.load(text: "[server]\nendpoints = [\"127.0.0.1:7000\"]\ntls = false\nredirect_allow = [\"127.0.0.2:7001\", \"[::1]\"]\n", file: "f")
        _ = try ConfigLoader.load(text: text + "allow_plaintext = true\n", file: "f")
        _ = try ConfigLoader.load(text: "[server]\nendpoints = [\"127.0.0.1:7000\"]\nredirect_allow = [\"*.example.net\"]\n", file: "f")
    }

    @Test func allowPlaintext_isAccepted_andWarnedAbout() throws {
        let c = try ConfigLoader.load(text: "[server]\nendpoints = [\"im.example.net:7443\"]\ntls = false\nallow_plaintext = true\n", file: "f")
        #expect(c.server.allowPlaintext)
        let warnings = SecurityWarnings.of(c)
        #expect(warnings.count == 1)
        #expect(warnings.first?.contains("in the clear") == true)
    }

    @Test func verifyFalse_isWarnedAbout() throws {
        let c = try ConfigLoader.load(text: "[server]\nendpoints = [\"im.example.net:7443\"]\n[server.tls]\nverify = false\n", file: "f")
        #expect(SecurityWarnings.of(c).contains { $0.contains("verify = false") })
        #expect(SecurityWarnings.of(DaemonConfiguration()).isEmpty)
    }

    @Test func perUIDLimits_haveTheirDocumentedDefaults_andAreRead() throws {
        let defaults = DaemonConfiguration.Limits()
        #expect(defaults.maxClientsPerUID == 64)
        #expect(defaults.maxSessionsPerUID == 1_000)
        let c = try ConfigLoader.load(text: "[limits]\nmax_clients_per_uid = 3\nmax_sessions_per_uid = 7\n", file: "f")
        #expect(c.limits.maxClientsPerUID == 3)
        #expect(c.limits.maxSessionsPerUID == 7)
        #expect(SessionLimits(c.limits).maxSessionsPerUID == 7)
    }
}
