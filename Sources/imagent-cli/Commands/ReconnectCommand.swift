import AgentIPC
import ArgumentParser

/// `imagent reconnect`: the RECONNECT request (root or imagentd's admin group).
struct ReconnectCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reconnect",
        abstract: "Drop the link and connect again at once.",
        discussion: "Needs root or membership in imagentd's admin group; others get PERMISSION_DENIED (exit 3).")

    @OptionGroup var options: GlobalOptions

    func run() async throws {
        try await AdminRequest.run(
            options, op: .reconnect,
            done: "imagentd is reconnecting the link; follow it with `imagent watch`"
        ) { try await $0.reconnectLink() }
    }
}
