import AgentIPC
import ArgumentParser

/// `imagent close`: end a session for good.
struct CloseCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "close",
        abstract: "Close a session for good, here and on the server.",
        discussion: "Messages still in its outbox or inbox are dropped. Only the session's owner (or an admin) may.")

    @OptionGroup var options: GlobalOptions

    @Argument(help: ArgumentHelp("The session to close.", valueName: "session"))
    var session: UInt64

    func run() async throws {
        try await options.withClient(for: "close") { try await $0.close(session: session) }
        if options.json {
            Output.json(.object(["session": .integer(session), "closed": .bool(true)]))
        } else {
            Output.line("session \(session) closed")
        }
    }
}
