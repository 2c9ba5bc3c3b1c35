import ConfigFile

/// A problem in a configuration file, with the line it is on.
struct ConfigProblem: Error, Hashable, Sendable, CustomStringConvertible {
    var file: String
    var line: Int
    var message: String
    var description: String { "\(file):\(line): \(message)" }
}

/// All the problems found in one file: validation reports every one, not just the first.
struct ConfigProblems: Error, Sendable, CustomStringConvertible {
    var problems: [ConfigProblem]
    var description: String { problems.map(\.description).joined(separator: "\n") }
}

/// Reads `imagentd.toml` into a `DaemonConfiguration`, refusing unknown
/// tables and keys and wrong types or values with `file:line` messages.
enum ConfigLoader {
    static func load(text: String, file: String) throws(ConfigProblems) -> DaemonConfiguration {
        let document: TOMLTable
        do {
            document = try TOMLParser.parse(text)
        } catch {
            throw ConfigProblems(problems: [ConfigProblem(file: file, line: error.line, message: "column \(error.column): \(error.message)")])
        }
        var reader = Reader(file: file)
        var configuration = DaemonConfiguration()
        reader.read(document, into: &configuration)
        reader.checkWhole(configuration, document: document)
        guard reader.problems.isEmpty else {
            // Stable sort: problems on one line keep the order they were found in.
            let ordered = reader.problems.enumerated().sorted { ($0.element.line, $0.offset) < ($1.element.line, $1.offset) }
            throw ConfigProblems(problems: ordered.map(\.element))
        }
        return configuration
    }
}

/// One key's reader: converts a TOML value and stores it, or says what is wrong.
typealias KeyReader = @Sendable (inout DaemonConfiguration, TOMLValue) -> String?

private struct Reader {
    var file: String
    var problems: [ConfigProblem] = []

    mutating func problem(_ line: Int, _ message: String) {
        problems.append(ConfigProblem(file: file, line: line, message: message))
    }

    /// The schema: table → key → reader. Key names are fixed by design.md and documented in imagentd.toml(5).
    static let schema: [(table: String, keys: [(String, KeyReader)])] = [
        ("server", [
            ("endpoints", { c, v in stringList(v, nonEmpty: true).map { c.server.endpoints = $0 }.failure
                ?? c.server.endpoints.lazy.compactMap(endpointProblem).first }),
            ("agent_id", { c, v in string(v, length: 1...128).map { c.server.agentID = $0 }.failure }),
            ("max_frame_bytes", { c, v in integer(v, in: 1_024...(16 << 20)).map { c.server.maxFrameBytes = UInt32($0) }.failure }),
            ("tls", { c, v in
                if case .boolean(let enabled) = v { c.server.tls.enabled = enabled; return nil }
                return "expected true, false or a [server.tls] table, found \(v.typeName)"
            }),
            ("allow_plaintext", { c, v in boolean(v).map { c.server.allowPlaintext = $0 }.failure }),
            ("redirect_allow", { c, v in stringList(v, nonEmpty: false).map { c.server.redirectAllow = $0 }.failure
                ?? c.server.redirectAllow.lazy.compactMap(RedirectPolicy.patternProblem).first }),
            ("protocol", { c, v in choice(v, DaemonConfiguration.UpstreamProtocol.self).map { c.server.upstreamProtocol = $0 }.failure }),
        ]),
        ("server.tls", [
            ("enabled", { c, v in boolean(v).map { c.server.tls.enabled = $0 }.failure }),
            ("ca_file", { c, v in path(v).map { c.server.tls.caFile = $0 }.failure }),
            ("server_name", { c, v in string(v, length: 1...253).map { c.server.tls.serverName = $0 }.failure }),
            ("certificate_file", { c, v in path(v).map { c.server.tls.certificateFile = $0 }.failure }),
            ("private_key_file", { c, v in path(v).map { c.server.tls.privateKeyFile = $0 }.failure }),
            ("verify", { c, v in boolean(v).map { c.server.tls.verify = $0 }.failure }),
        ]),
        ("mqtt", DaemonConfiguration.MQTTSettings.keys),
        ("auth", [
            ("token_file", { c, v in path(v).map { c.token = .file($0) }.failure }),
            ("token_command", { c, v in stringList(v, nonEmpty: true).map { c.token = .command($0) }.failure }),
            ("token_credential", { c, v in string(v, length: 1...255).map { c.token = .credential($0) }.failure }),
        ]),
        ("ipc", [
            ("socket", { c, v in path(v).map { c.ipc.socket = $0 }.failure }),
            ("mode", { c, v in
                guard case .string(let text) = v, let mode = UInt32(text, radix: 8), mode <= 0o777 else {
                    return "expected an octal mode as a string, such as \"0660\""
                }
                c.ipc.mode = mode
                return nil
            }),
            ("group", { c, v in string(v, length: 0...32).map { c.ipc.group = $0 }.failure }),
            ("admin_group", { c, v in string(v, length: 0...32).map { c.ipc.adminGroup = $0 }.failure }),
        ]),
        ("store", [
            ("directory", { c, v in path(v).map { c.store.directory = $0 }.failure }),
            ("durability", { c, v in choice(v, DaemonConfiguration.Durability.self).map { c.store.durability = $0 }.failure }),
            ("memory_budget_bytes", { c, v in integer(v, in: (64 << 10)...(1 << 30)).map { c.store.memoryBudgetBytes = $0 }.failure }),
            ("max_bytes", { c, v in integer(v, in: (1 << 20)...(1 << 50)).map { c.store.maxBytes = $0 }.failure }),
        ]),
        ("heartbeat", [
            ("min_seconds", { c, v in integer(v, in: 1...3_600).map { c.heartbeat.minSeconds = $0 }.failure }),
            ("max_seconds", { c, v in integer(v, in: 1...3_600).map { c.heartbeat.maxSeconds = $0 }.failure }),
        ]),
        ("reconnect", [
            ("base_ms", { c, v in integer(v, in: 10...600_000).map { c.reconnect.baseMS = $0 }.failure }),
            ("cap_ms", { c, v in integer(v, in: 10...3_600_000).map { c.reconnect.capMS = $0 }.failure }),
            ("probe_ms", { c, v in integer(v, in: 100...60_000).map { c.reconnect.probeMS = $0 }.failure }),
        ]),
        ("limits", [
            ("max_clients", { c, v in integer(v, in: 1...65_536).map { c.limits.maxClients = $0 }.failure }),
            ("max_clients_per_uid", { c, v in integer(v, in: 1...65_536).map { c.limits.maxClientsPerUID = $0 }.failure }),
            ("max_sessions", { c, v in integer(v, in: 1...1_000_000).map { c.limits.maxSessions = $0 }.failure }),
            ("max_sessions_per_uid", { c, v in integer(v, in: 1...1_000_000).map { c.limits.maxSessionsPerUID = $0 }.failure }),
            ("max_payload_bytes", { c, v in integer(v, in: 1...(16 << 20)).map { c.limits.maxPayloadBytes = $0 }.failure }),
            ("outbox_messages", { c, v in integer(v, in: 1...10_000_000).map { c.limits.outboxMessages = $0 }.failure }),
            ("inbox_messages", { c, v in integer(v, in: 1...10_000_000).map { c.limits.inboxMessages = $0 }.failure }),
            ("outbox_bytes", { c, v in integer(v, in: 1...(1 << 50)).map { c.limits.outboxBytes = $0 }.failure }),
            ("uid_outbox_bytes", { c, v in integer(v, in: 1...(1 << 50)).map { c.limits.uidOutboxBytes = $0 }.failure }),
        ]),
        ("log", [
            ("level", { c, v in choice(v, DaemonConfiguration.LogLevel.self).map { c.logLevel = $0 }.failure }),
        ]),
        ("network", [
            ("watch", { c, v in boolean(v).map { c.watchNetwork = $0 }.failure }),
        ]),
        ("metrics", [
            ("prometheus_listen", { c, v in
                string(v, length: 0...300).map { c.prometheusListen = $0 }.failure
                    ?? (c.prometheusListen.isEmpty ? nil : endpointProblem(c.prometheusListen))
            }),
            ("prometheus_allow_remote", { c, v in boolean(v).map { c.prometheusAllowRemote = $0 }.failure }),
        ]),
    ]

    mutating func read(_ document: TOMLTable, into configuration: inout DaemonConfiguration) {
        read(document, name: "", into: &configuration)
    }

    private mutating func read(_ table: TOMLTable, name: String, into configuration: inout DaemonConfiguration) {
        let keys = Self.schema.first { $0.table == name }?.keys ?? []
        for entry in table.entries {
            let qualified = name.isEmpty ? entry.key : "\(name).\(entry.key)"
            if case .table(let child) = entry.value, Self.schema.contains(where: { $0.table == qualified }) {
                if qualified == "server.tls" { configuration.server.tls.enabled = true }
                read(child, name: qualified, into: &configuration)
            } else if let reader = keys.first(where: { $0.0 == entry.key })?.1 {
                if let message = reader(&configuration, entry.value) {
                    problem(entry.line, "\(qualified): \(message)")
                }
            } else if name.isEmpty {
                let tables = Self.schema.map { "[\($0.table)]" }.joined(separator: ", ")
                problem(entry.line, "unknown table or key \"\(entry.key)\"; the file has the tables \(tables)")
            } else {
                let known = keys.map(\.0).joined(separator: ", ")
                problem(entry.line, "unknown key \"\(entry.key)\" in [\(name)]; its keys are \(known)")
            }
        }
    }

    /// Rules that tie several keys together.
    mutating func checkWhole(_ c: DaemonConfiguration, document: TOMLTable) {
        if c.heartbeat.minSeconds > c.heartbeat.maxSeconds {
            problem(document.line("heartbeat", "min_seconds"), "heartbeat.min_seconds (\(c.heartbeat.minSeconds)) is above heartbeat.max_seconds (\(c.heartbeat.maxSeconds))")
        }
        if c.reconnect.baseMS > c.reconnect.capMS {
            problem(document.line("reconnect", "base_ms"), "reconnect.base_ms (\(c.reconnect.baseMS)) is above reconnect.cap_ms (\(c.reconnect.capMS))")
        }
        if case .table(let auth)? = document["auth"]?.value, auth.entries.count > 1 {
            problem(auth.entries[1].line, "[auth] takes one of token_file, token_command and token_credential, not several")
        }
        if c.server.tls.certificateFile.isEmpty != c.server.tls.privateKeyFile.isEmpty {
            problem(document.line("server", "tls"), "server.tls: certificate_file and private_key_file go together")
        }
        if !c.server.tls.enabled, !c.server.allowPlaintext,
           let remote = c.server.endpoints.first(where: { !(Endpoint(parsing: $0)?.isLoopback ?? true) }) {
            problem(document.line("server", "tls"), "server: TLS is off and \"\(remote)\" is not a loopback address: the token and every message would cross the network in the clear; turn TLS on, or set [server] allow_plaintext = true if this network is trusted")
        }
        if !c.server.tls.enabled, !c.server.allowPlaintext,
           let remote = c.server.redirectAllow.first(where: { !RedirectPolicy.patternIsLoopback($0) }) {
            problem(document.line("server", "redirect_allow"), "server.redirect_allow: \"\(remote)\" would receive the token in the clear, as TLS is off; turn TLS on, or set [server] allow_plaintext = true")
        }
        if c.server.upstreamProtocol == .mqtt, c.mqtt.clientID.isEmpty, let message = c.mqtt.agentIDProblem(c.server.agentID) {
            problem(document.line("server", "agent_id"), message)
        }
        if !c.prometheusListen.isEmpty, !c.prometheusAllowRemote,
           let endpoint = Endpoint(parsing: c.prometheusListen), !endpoint.isLoopback {
            problem(document.line("metrics", "prometheus_listen"), "metrics.prometheus_listen: \"\(c.prometheusListen)\" is not a loopback address: the endpoint has no authentication, so anyone who can reach it would read every user's metrics; listen on 127.0.0.1 or [::1], or set [metrics] prometheus_allow_remote = true if that network may read them")
        }
        if c.limits.maxPayloadBytes > Int(c.server.maxFrameBytes) {
            problem(document.line("limits", "max_payload_bytes"), "limits.max_payload_bytes (\(c.limits.maxPayloadBytes)) is above server.max_frame_bytes (\(c.server.maxFrameBytes)): such messages could never be received")
        }
    }
}

// MARK: value readers: each returns the value, or the sentence that says what is wrong

enum Read<Value> {
    case value(Value)
    case problem(String)

    func map(_ store: (Value) -> Void) -> Read<Void> {
        switch self {
        case .value(let value): store(value); return .value(())
        case .problem(let message): return .problem(message)
        }
    }

    var failure: String? {
        if case .problem(let message) = self { return message }
        return nil
    }
}

func string(_ value: TOMLValue, length: ClosedRange<Int>) -> Read<String> {
    guard case .string(let text) = value else { return .problem("expected a string, found \(value.typeName)") }
    guard length.contains(text.utf8.count) else {
        return .problem("must be \(length.lowerBound)–\(length.upperBound) bytes long, not \(text.utf8.count)")
    }
    return .value(text)
}

private func path(_ value: TOMLValue) -> Read<String> {
    guard case .string(let text) = value else { return .problem("expected a path as a string, found \(value.typeName)") }
    guard text.hasPrefix("/") else { return .problem("\"\(text)\" must be an absolute path") }
    return .value(text)
}

private func boolean(_ value: TOMLValue) -> Read<Bool> {
    guard case .boolean(let flag) = value else { return .problem("expected true or false, found \(value.typeName)") }
    return .value(flag)
}

func integer(_ value: TOMLValue, in range: ClosedRange<Int>) -> Read<Int> {
    guard case .integer(let number) = value else { return .problem("expected an integer, found \(value.typeName)") }
    guard let int = Int(exactly: number), range.contains(int) else {
        return .problem("\(number) is out of range \(range.lowerBound)–\(range.upperBound)")
    }
    return .value(int)
}

private func stringList(_ value: TOMLValue, nonEmpty: Bool) -> Read<[String]> {
    guard case .array(let elements) = value else { return .problem("expected an array of strings, found \(value.typeName)") }
    var strings: [String] = []
    for element in elements {
        guard case .string(let text) = element, !text.isEmpty else { return .problem("expected an array of non-empty strings") }
        strings.append(text)
    }
    if nonEmpty, strings.isEmpty { return .problem("must not be empty") }
    return .value(strings)
}

private func choice<E: RawRepresentable<String> & CaseIterable>(_ value: TOMLValue, _: E.Type) -> Read<E> {
    let names = E.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")
    guard case .string(let text) = value, let chosen = E(rawValue: text) else { return .problem("expected one of \(names)") }
    return .value(chosen)
}

/// Checks `host:port` (IPv6 literal in brackets); nil when it is well formed.
func endpointProblem(_ text: String) -> String? {
    let host: Substring
    let port: Substring
    if text.hasPrefix("[") {
        guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
            return "\"\(text)\" is not host:port (an IPv6 address goes in brackets: [::1]:7443)"
        }
        host = text[text.index(after: text.startIndex)..<close]
        port = text[text.index(close, offsetBy: 2)...]
    } else {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2 else { return "\"\(text)\" is not host:port (an IPv6 address goes in brackets: [::1]:7443)" }
        host = parts[0]
        port = parts[1]
    }
    guard !host.isEmpty else { return "\"\(text)\" has no host" }
    guard let number = UInt16(port), number > 0 else { return "\"\(text)\" has no valid port (1–65535)" }
    return nil
}

extension ConfigLoader {
    /// Every key the loader accepts, as `table.key` (`server.tls` is also the
    /// boolean shorthand): the test that imagentd.toml(5) matches the code reads it.
    static var acceptedKeys: [String] {
        Reader.schema.flatMap { table in table.keys.map { "\(table.table).\($0.0)" } }
    }
}
