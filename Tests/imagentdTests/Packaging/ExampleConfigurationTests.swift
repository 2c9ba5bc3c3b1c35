import Glibc
import Testing

@testable import IMAgentCore

/// `packaging/imagentd.toml` is installed as /etc/imagent/imagentd.toml and
/// promises to show every key with its default; these tests hold it to that.
@Suite struct ExampleConfigurationTests {
    /// Every key the loader knows, as `table.key` (`server.tls` the boolean
    /// shorthand aside). A key added to the loader must be added here, to
    /// the example file and to imagentd.toml(5).
    static let allKeys: Set<String> = [
        "server.endpoints", "server.agent_id", "server.max_frame_bytes", "server.allow_plaintext", "server.redirect_allow",
        "server.tls.enabled", "server.tls.ca_file", "server.tls.server_name", "server.tls.certificate_file",
        "server.tls.private_key_file", "server.tls.verify",
        "auth.token_credential", "auth.token_file", "auth.token_command",
        "ipc.socket", "ipc.mode", "ipc.group", "ipc.admin_group",
        "store.directory", "store.durability", "store.memory_budget_bytes", "store.max_bytes",
        "heartbeat.min_seconds", "heartbeat.max_seconds",
        "reconnect.base_ms", "reconnect.cap_ms", "reconnect.probe_ms",
        "limits.max_clients", "limits.max_clients_per_uid", "limits.max_sessions", "limits.max_sessions_per_uid", "limits.max_payload_bytes", "limits.outbox_messages",
        "limits.inbox_messages", "limits.outbox_bytes", "limits.uid_outbox_bytes",
        "log.level", "network.watch", "metrics.prometheus_listen", "metrics.prometheus_allow_remote",
    ]

    let text = readRepositoryFile("packaging/imagentd.toml")

    @Test func asShipped_isTheDefaultsWithTheUnitsTokenCredential() throws {
        var expected = DaemonConfiguration()
        expected.token = .credential("token")
        #expect(try ConfigLoader.load(text: text, file: "imagentd.toml") == expected)
    }

    @Test func everyCommentedKeyUncommented_givesTheDefaults_exceptTheMarkedExamples() throws {
        let (uncommented, _) = Self.uncommentingKeys(text)
        var expected = DaemonConfiguration()
        expected.token = .credential("token")
        expected.server.endpoints = ["im.example.net:7443", "[2001:db8::1]:7443"]
        expected.server.agentID = "host-7f3a"
        expected.server.tls.caFile = "/etc/imagent/ca.pem"
        expected.server.tls.serverName = "im.example.net"
        expected.server.tls.certificateFile = "/etc/imagent/client.pem"
        expected.server.tls.privateKeyFile = "/etc/imagent/client.key"
        expected.store.maxBytes = 10 << 30
        // The uncommented [server.tls] table holds "enabled = true", the default.
        #expect(try ConfigLoader.load(text: uncommented, file: "imagentd.toml") == expected)
    }

    @Test func showsEveryKeyTheLoaderKnows() {
        let (_, keys) = Self.uncommentingKeys(text)
        #expect(keys == Self.allKeys)
    }

    @Test func exampleMarks_standOnlyAboveKeysWithoutAUsableDefault() {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        let marked = zip(lines, lines.dropFirst()).filter { $0.0 == "# example:" }.map { String($0.1.prefix { $0 != " " }) }
        #expect(marked == [
            "#endpoints", "#agent_id", "#ca_file", "#server_name", "#certificate_file", "#private_key_file",
            "#token_file", "#token_command",
        ])
    }

    /// Uncomments every `#key = value` line and the `#[table]` headers, outside
    /// [auth] (which takes one key at a time); returns the text and the keys seen.
    static func uncommentingKeys(_ text: String) -> (String, Set<String>) {
        var table = ""
        var keys = Set<String>()
        var output: [Substring] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            var effective = line
            if line.hasPrefix("#["), line.hasSuffix("]") {
                effective = line.dropFirst()
            }
            if effective.hasPrefix("["), effective.hasSuffix("]") {
                table = String(effective.dropFirst().dropLast())
                output.append(effective)
                continue
            }
            let assignment = line.hasPrefix("#") ? line.dropFirst() : line
            if let equals = assignment.firstRange(of: " = "), assignment.first?.isLetter == true {
                keys.insert(table + "." + assignment[..<equals.lowerBound])
                output.append(table == "auth" ? line : assignment)
            } else {
                output.append(line)
            }
        }
        return (output.joined(separator: "\n"), keys)
    }
}

/// A file of the repository, found from this source file's path.
func readRepositoryFile(_ relativePath: String, from source: String = #filePath) -> String {
    var root = source
    for _ in 0..<4 {
        root = String(root[..<(root.lastIndex(of: "/") ?? root.startIndex)])
    }
    let path = root + "/" + relativePath
    guard let file = fopen(path, "r") else { preconditionFailure("cannot open \(path)") }
    defer { fclose(file) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65_536)
    while true {
        let count = fread(&chunk, 1, chunk.count, file)
        if count == 0 { break }
        bytes += chunk[..<count]
    }
    return String(decoding: bytes, as: UTF8.self)
}
