import Testing

@testable import IMAgentCore

@Suite struct ConfigLoaderTests {
    @Test func emptyFile_givesEveryDefault() throws {
        #expect(try ConfigLoader.load(text: "", file: "x.toml") == DaemonConfiguration())
    }

    @Test func readsEveryDocumentedKey() throws {
        let c = try ConfigLoader.load(text: """
            [server]
            endpoints = ["im.example.net:7443", "[2001:db8::1]:7443"]
            agent_id = "host-7f3a"
            max_frame_bytes = 2097152
            [server.tls]
            ca_file = "/etc/imagent/ca.pem"
            server_name = "im.example.net"
            certificate_file = "/etc/imagent/client.pem"
            private_key_file = "/etc/imagent/client.key"
            [auth]
            token_command = ["/usr/bin/get-token", "--plain"]
            [ipc]
            socket = "/run/imagent/imagent.sock"
            mode = "0660"
            group = "imagent"
            admin_group = "wheel"
            [store]
            directory = "/var/lib/imagent"
            durability = "process"
            [heartbeat]
            min_seconds = 1
            max_seconds = 2
            [reconnect]
            base_ms = 100
            cap_ms = 2000
            probe_ms = 250
            [limits]
            max_clients = 10
            max_sessions = 20
            max_payload_bytes = 65536
            outbox_messages = 30
            inbox_messages = 40
            [log]
            level = "debug"
            [network]
            watch = false
            [metrics]
            prometheus_listen = "127.0.0.1:9464"
            """, file: "imagentd.toml")
        #expect(c.server.endpoints == ["im.example.net:7443", "[2001:db8::1]:7443"])
        #expect(c.server.tls.enabled && c.server.tls.serverName == "im.example.net")
        #expect(c.token == .command(["/usr/bin/get-token", "--plain"]))
        #expect(c.ipc.mode == 0o660 && c.ipc.adminGroup == "wheel")
        #expect(c.store.durability == .process)
        #expect(c.heartbeat.minSeconds == 1 && c.heartbeat.maxSeconds == 2)
        #expect(c.reconnect.baseMS == 100 && c.reconnect.capMS == 2000 && c.reconnect.probeMS == 250)
        #expect(c.limits == .init(maxClients: 10, maxSessions: 20, maxPayloadBytes: 65536, outboxMessages: 30, inboxMessages: 40))
        #expect(c.logLevel == .debug && !c.watchNetwork && c.prometheusListen == "127.0.0.1:9464")
    }

    @Test func tlsAsABoolean_turnsItOnWithDefaults() throws {
        let c = try ConfigLoader.load(text: "[server]\ntls = true", file: "f")
        #expect(c.server.tls.enabled && c.server.tls.verify)
    }

    @Test func everyProblemIsReported_withItsLine() {
        let text = """
            [server]
            endpoints = ["no-port", "h:99999"]
            tls = "yes"
            colour = 3
            [heartbeat]
            min_seconds = 400
            max_seconds = 300
            [auth]
            token_file = "relative/path"
            token_command = ["x"]
            [ipc]
            mode = 660
            [store]
            durability = "sometimes"
            [surprise]
            """
        #expect(throws: ConfigProblems.self) { _ = try ConfigLoader.load(text: text, file: "/etc/imagent/imagentd.toml") }
        do {
            _ = try ConfigLoader.load(text: text, file: "/etc/imagent/imagentd.toml")
        } catch {
            #expect(error.problems.map(\.description) == [
                "/etc/imagent/imagentd.toml:2: server.endpoints: \"no-port\" is not host:port (an IPv6 address goes in brackets: [::1]:7443)",
                "/etc/imagent/imagentd.toml:3: server.tls: expected true, false or a [server.tls] table, found a string",
                "/etc/imagent/imagentd.toml:4: unknown key \"colour\" in [server]; its keys are endpoints, agent_id, max_frame_bytes, tls, allow_plaintext, redirect_allow, protocol",
                "/etc/imagent/imagentd.toml:6: heartbeat.min_seconds (400) is above heartbeat.max_seconds (300)",
                "/etc/imagent/imagentd.toml:9: auth.token_file: \"relative/path\" must be an absolute path",
                "/etc/imagent/imagentd.toml:10: [auth] takes one of token_file, token_command and token_credential, not several",
                "/etc/imagent/imagentd.toml:12: ipc.mode: expected an octal mode as a string, such as \"0660\"",
                "/etc/imagent/imagentd.toml:14: store.durability: expected one of \"process\", \"power\"",
                "/etc/imagent/imagentd.toml:15: unknown table or key \"surprise\"; the file has the tables [server], [server.tls], [mqtt], [auth], [ipc], [store], [heartbeat], [reconnect], [limits], [log], [network], [metrics]",
            ])
        }
    }

    @Test func crossKeyRules_pointAtTheRightLine() {
        #expect(throws: ConfigProblems.self) {
            _ = try ConfigLoader.load(text: "[heartbeat]\nmax_seconds = 20\nmin_seconds = 30", file: "f")
        }
        do {
            _ = try ConfigLoader.load(text: "[heartbeat]\nmax_seconds = 20\nmin_seconds = 30", file: "f")
        } catch {
            #expect(error.description == "f:3: heartbeat.min_seconds (30) is above heartbeat.max_seconds (20)")
        }
    }

    @Test func syntaxErrors_carryLineAndColumn() {
        do {
            _ = try ConfigLoader.load(text: "[log]\nlevel = info", file: "f")
            Issue.record("accepted a bare word")
        } catch {
            #expect(error.description == "f:2: column 9: \"info\" is not a TOML value (strings need quotes)")
        }
    }
}
