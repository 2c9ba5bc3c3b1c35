import AgentIPC
import ArgumentParser

/// `imagent sessions`: one row per session the caller may see.
struct SessionsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sessions",
        abstract: "List your sessions (every session, for root and the admin group) with their sequences and queues.",
        discussion: """
            SENT is the highest seq imagentd accepted, ACKED the highest the server holds, \
            DELIVERED the highest a client acknowledged, RECEIVED the highest that arrived. \
            With --json, prints imagentd's SESSIONS document as one line of JSON.
            """)

    @OptionGroup var options: GlobalOptions

    func run() async throws {
        let text = try await options.withClient(for: "sessions") { try await $0.sessions() }
        let document = try DaemonDocument.parse(text, from: .sessions)
        if options.json {
            Output.line(document.compactText)
        } else {
            Output.lines(Self.render(document))
        }
    }

    private static let columns: [(key: String, header: String)] = [
        ("session", "SESSION"), ("service", "SERVICE"), ("state", "STATE"), ("priority", "PRIORITY"),
        ("attached", "ATTACHED"), ("sent_seq", "SENT"), ("acked_seq", "ACKED"), ("delivered_seq", "DELIVERED"),
        ("received_seq", "RECEIVED"), ("outbox", "OUTBOX"), ("inbox", "INBOX"),
    ]

    static func render(_ document: JSONValue) -> [String] {
        guard let sessions = document["sessions"]?.elements else {
            // Not the shape this version knows: show it rather than nothing.
            return [document.prettyText]
        }
        guard !sessions.isEmpty else { return ["no sessions"] }
        let known = Set(columns.map(\.key))
        let extras = sessions.map { session in
            (session.members ?? []).filter { !known.contains($0.key) }
                .map { "\($0.key)=\($0.value.displayText)" }.joined(separator: " ")
        }
        var table = Table(headers: columns.map(\.header) + (extras.contains { !$0.isEmpty } ? ["OTHER"] : []))
        for (session, extra) in zip(sessions, extras) {
            var row = columns.map { column in
                column.key == "priority" ? priorityName(session["priority"]) : session[column.key].displayText
            }
            if table.headers.count > columns.count { row.append(extra.isEmpty ? "-" : extra) }
            table.rows.append(row)
        }
        return table.lines
    }

    /// PRIORITY's u8 values by name (`ipc.md` section 3); anything else as sent.
    private static func priorityName(_ value: JSONValue?) -> String {
        switch value {
        case .number("0"): "high"
        case .number("1"): "normal"
        case .number("2"): "low"
        default: value.displayText
        }
    }
}
