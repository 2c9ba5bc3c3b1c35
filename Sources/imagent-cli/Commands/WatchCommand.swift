import AgentIPC
import ArgumentParser

/// `imagent watch`: the daemon's live event stream.
struct WatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Print imagentd's events (link, sessions, heartbeats) as they happen, until Ctrl-C.",
        discussion: """
            One line per event: the time of day (UTC), the event's name, then its other fields \
            as key=value. With --json, each event's JSON object on a line of its own.
            """)

    @OptionGroup var options: GlobalOptions

    @Option(help: ArgumentHelp("Stop after this many events.", valueName: "n"))
    var count: Int?

    func validate() throws {
        if let count, count < 1 { throw ValidationError("--count must be 1 or more") }
    }

    func run() async throws {
        Interrupt.exitQuietly()
        try await options.withClient(for: "watch") { client in
            var seen = 0
            for try await event in try await client.watch() {
                guard case .watch(let document) = event else { continue }
                Output.line(options.json ? Self.jsonLine(document.json) : Self.line(document.json))
                seen += 1
                if let count, seen >= count { return }
            }
        }
    }

    /// One compact line even when the daemon pretty-prints.
    static func jsonLine(_ text: String) -> String {
        (try? JSONParser.parse(text))?.compactText ?? text
    }

    /// "12:00:01.234  link_state  state=connected endpoint=host:port"
    static func line(_ text: String) -> String {
        guard let event = try? JSONParser.parse(text), let members = event.members else { return text }
        let fields = members.filter { $0.key != "event" && $0.key != "time_ms" }.map { member in
            let value = member.value.displayText
            return "\(member.key)=" + (value.contains(" ") ? JSONValue.quoted(value) : value)
        }
        return ([HumanFormat.timeOfDay(milliseconds: event["time_ms"]), event["event"].displayText] + fields)
            .joined(separator: "  ")
    }
}
