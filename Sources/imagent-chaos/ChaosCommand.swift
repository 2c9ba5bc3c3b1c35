import ArgumentParser

/// `imagent-chaos`: the chaos suite (issue 6, "Proof under fire") and the delay proxy it uses.
@main
struct ChaosCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "imagent-chaos",
        abstract: "imagentd and imagent-refserver under network faults, kills and restarts, with every message checked.",
        subcommands: [RunCommand.self, PartitionCommand.self, ProxyCommand.self],
        defaultSubcommand: RunCommand.self)
}
