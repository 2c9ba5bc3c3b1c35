import AgentIPC
import ArgumentParser

/// `imagent reload`: the RELOAD request (root or imagentd's admin group).
struct ReloadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reload",
        abstract: "Make imagentd re-read its configuration file.",
        discussion: "Needs root or membership in imagentd's admin group; others get PERMISSION_DENIED (exit 3).")

    @OptionGroup var options: GlobalOptions

    func run() async throws {
        try await AdminRequest.run(
            options, op: .reload,
            done: "imagentd re-read its configuration; its log says what could not change live"
        ) { try await $0.reload() }
    }
}
