import AgentIPC
import ArgumentParser

/// `imagent connect`: the CONNECT request (root or imagentd's admin group).
struct ConnectCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "connect",
        abstract: "Bring the link to the server up (after `imagent disconnect`).",
        discussion: "Needs root or membership in imagentd's admin group; others get PERMISSION_DENIED (exit 3).")

    @OptionGroup var options: GlobalOptions

    func run() async throws {
        try await AdminRequest.run(
            options, op: .connect,
            done: "imagentd is bringing the link up; follow it with `imagent watch`"
        ) { try await $0.connectLink() }
    }
}
