import AgentIPC
import ArgumentParser

/// `imagent reload`: the RELOAD request (root or imagentd's admin group).
struct ReloadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reload",
        abstract: "Make imagentd re-read its configuration file; prints what was applied and what needs a restart.",
        discussion: """
            Needs root or membership in imagentd's admin group; others get PERMISSION_DENIED (exit 3). \
            A file with problems changes nothing: they are printed and imagent exits 4.
            """)

    @OptionGroup var options: GlobalOptions

    func run() async throws {
        let report = try await options.withClient(for: "reload") { try await $0.reload() }
        guard let report else {
            // An older daemon answers OK without a report.
            if options.json {
                Output.json(.object(["ok": .bool(true), "request": .string("RELOAD")]))
            } else {
                Output.line("imagentd re-read its configuration; its log says what could not change live")
            }
            return
        }
        let document = try DaemonDocument.parse(report, from: .reload)
        if options.json {
            Output.line(document.compactText)
        } else {
            Output.lines(Self.render(document))
        }
    }

    /// "applied: limits.max_clients", "applied by reconnecting: server.endpoints", "needs a restart: ipc".
    static func render(_ report: JSONValue) -> [String] {
        func names(_ key: String) -> [String] {
            (report[key]?.elements ?? []).map(\.displayText)
        }
        var lines: [String] = []
        let applied = names("applied"), reconnect = names("applied_by_reconnect"), restart = names("needs_restart")
        if applied.isEmpty && reconnect.isEmpty && restart.isEmpty {
            lines.append("imagentd re-read its configuration: nothing changed")
        } else {
            lines.append("imagentd re-read its configuration")
        }
        if !applied.isEmpty { lines.append("applied: " + applied.joined(separator: ", ")) }
        if !reconnect.isEmpty { lines.append("applied by reconnecting the link: " + reconnect.joined(separator: ", ")) }
        if !restart.isEmpty {
            lines.append("needs a restart (systemctl restart imagentd): " + restart.joined(separator: ", "))
        }
        if let missing = report["unconfigured"]?.stringValue {
            lines.append("still unconfigured: \(missing)")
        }
        return lines
    }
}
