import AgentIPC
import ArgumentParser

/// `imagent open`: create a session, or attach to one to see where it stands.
struct OpenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "open",
        abstract: "Open a new session for a service, or attach to an existing one with --session.",
        discussion: """
            Prints the session's id and where its sequences stand. The session lives on after \
            imagent exits (closing the connection only detaches it): send with `imagent send ID`, \
            read with `imagent listen ID`, end it with `imagent close ID`.
            """)

    /// PRIORITY by name.
    enum Priority: String, ExpressibleByArgument, CaseIterable {
        case high, normal, low

        var ipcValue: IPCPriority {
            switch self {
            case .high: .high
            case .normal: .normal
            case .low: .low
            }
        }
    }

    @OptionGroup var options: GlobalOptions

    @Argument(help: ArgumentHelp("The service to open a new session for (1–255 bytes).", valueName: "service"))
    var service: String?

    @Option(help: ArgumentHelp("Attach to this existing session instead of opening a new one.", valueName: "id"))
    var session: UInt64?

    @Option(help: "The new session's priority on the link.")
    var priority: Priority?

    @Flag(name: .customLong("no-durable"),
          help: "Drop inbound messages that arrive while no client is attached, instead of keeping them.")
    var notDurable = false

    @Flag(name: [.customShort("q"), .long], help: "Print only the session's id (for scripts: ID=$(imagent open -q chat)).")
    var quiet = false

    func validate() throws {
        if quiet && options.json { throw ValidationError("give either -q (the id only) or --json, not both") }
        switch (service, session) {
        case (nil, nil):
            throw ValidationError("name a SERVICE to open a new session, or give --session ID to attach to one")
        case (.some, .some):
            throw ValidationError("give either a SERVICE (a new session) or --session ID (an existing one), not both")
        case (.some(let service), nil):
            guard (1...255).contains(service.utf8.count) else {
                throw ValidationError("a service name is 1 to 255 bytes long")
            }
        case (nil, .some(let session)):
            guard session != 0 else { throw ValidationError("session ids start at 1") }
            guard priority == nil && !notDurable else {
                throw ValidationError("--priority and --no-durable apply to a new session, not to --session")
            }
        }
    }

    func run() async throws {
        let opened = try await options.withClient(for: "open") { client in
            if let session {
                try await client.attach(session: session)
            } else {
                try await client.open(service: service ?? "", priority: (priority ?? .normal).ipcValue,
                                      durable: !notDurable)
            }
        }
        if quiet {
            Output.line("\(opened.session)")
        } else if options.json {
            Output.json(.object([
                "session": .integer(opened.session),
                "state": .string(opened.sessionState.description),
                "sent_seq": .integer(opened.sentSeq),
                "acked_seq": .integer(opened.ackedSeq),
                "delivered_seq": .integer(opened.deliveredSeq),
            ]))
        } else {
            let what = session == nil ? "opened for \(service ?? "")" : "attached"
            Output.line("session \(opened.session) \(what): \(opened.sessionState); "
                + "sent \(opened.sentSeq), acked \(opened.ackedSeq), delivered \(opened.deliveredSeq)")
        }
    }
}
