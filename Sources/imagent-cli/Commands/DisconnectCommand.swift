import AgentIPC
import ArgumentParser

/// `imagent disconnect`: the DISCONNECT request (root or imagentd's admin group).
struct DisconnectCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "disconnect",
        abstract: "Take the link down; it stays down until `imagent connect`.",
        discussion: "Needs root or membership in imagentd's admin group; others get PERMISSION_DENIED (exit 3).")

    @OptionGroup var options: GlobalOptions

    func run() async throws {
        try await AdminRequest.run(
            options, op: .disconnect,
            done: "imagentd took the link down; it stays down until `imagent connect`"
        ) { try await $0.disconnectLink() }
    }
}
