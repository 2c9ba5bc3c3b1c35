/// The `imagentd.toml` the suite's daemons run with (tests, the bench, the chaos run):
/// one writer of the file instead of one template per launcher.
public struct DaemonConfigFile: Sendable {
    public var endpoints: [String]
    public var tokenFile: String
    public var socketPath: String
    public var storeDirectory: String
    public var agentID: String
    /// `[ipc] mode`: 0666 lets a client of another uid connect (the folder must let it through too).
    public var socketMode = "0600"
    /// A server in another network namespace is on a test-only address, not loopback.
    public var allowPlaintext = false
    /// `[store] durability`; nil: the default.
    public var durability: String?
    /// `[heartbeat]` 1–2 s and `[reconnect]` from 100 ms to this cap: the suite's fast timing.
    /// Nil keeps the packaged defaults (heartbeat 15–300 s, backoff 1–60 s).
    public var reconnectCapMS: Int? = 1000
    public var watchNetwork = false
    /// `[log] level`; nil: the default.
    public var logLevel: String?
    /// More keys for the `[server]` table (e.g. `protocol = "mqtt"`).
    public var serverExtra = ""
    /// More tables, appended as they are (`[limits]`, `[metrics]`…).
    public var extra = ""

    public init(endpoints: [String], tokenFile: String, socketPath: String, storeDirectory: String, agentID: String) {
        self.endpoints = endpoints
        self.tokenFile = tokenFile
        self.socketPath = socketPath
        self.storeDirectory = storeDirectory
        self.agentID = agentID
    }

    public var text: String {
        var lines = [
            "[server]",
            "endpoints = [\(endpoints.map { "\"\($0)\"" }.joined(separator: ", "))]",
            "tls = false",
        ]
        if allowPlaintext { lines.append("allow_plaintext = true") }
        lines += [
            "agent_id = \"\(agentID)\"",
        ]
        if !serverExtra.isEmpty { lines.append(serverExtra) }
        lines += [
            "[auth]", "token_file = \"\(tokenFile)\"",
            "[ipc]", "socket = \"\(socketPath)\"", "mode = \"\(socketMode)\"",
            "[store]", "directory = \"\(storeDirectory)\"",
        ]
        if let durability { lines.append("durability = \"\(durability)\"") }
        if let reconnectCapMS {
            lines += ["[heartbeat]", "min_seconds = 1", "max_seconds = 2", "[reconnect]", "base_ms = 100", "cap_ms = \(reconnectCapMS)"]
        }
        lines += ["[network]", "watch = \(watchNetwork)"]
        if let logLevel { lines += ["[log]", "level = \"\(logLevel)\""] }
        return lines.joined(separator: "\n") + "\n" + extra + (extra.isEmpty || extra.hasSuffix("\n") ? "" : "\n")
    }

    public func write(to path: String) throws(ChildProcessError) { try writeFile(path, text) }
}
