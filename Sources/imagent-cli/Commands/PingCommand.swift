import AgentIPC
import ArgumentParser

/// `imagent ping`: is the daemon there, and how fast does it answer.
struct PingCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ping",
        abstract: "Send PING to imagentd and print the round-trip time.",
        discussion: "This measures the local socket only; the link's RTT to the server is in `imagent status`.")

    @OptionGroup var options: GlobalOptions

    @Option(help: ArgumentHelp("How many pings to send, one after the other.", valueName: "n"))
    var count = 1

    func validate() throws {
        if count < 1 { throw ValidationError("--count must be 1 or more") }
    }

    func run() async throws {
        try await options.withClient(for: "ping") { client in
            for number in 1...count {
                let milliseconds = Self.milliseconds(try await client.ping())
                if options.json {
                    Output.json(.object([
                        "seq": .integer(number),
                        "rtt_ms": .number(HumanFormat.decimal(milliseconds)),
                        "daemon_version": .string(client.welcome.daemonVersion),
                    ]))
                } else {
                    Output.line("pong from imagentd \(client.welcome.daemonVersion) at \(client.socketPath): "
                        + "seq=\(number) time=\(HumanFormat.decimal(milliseconds)) ms")
                }
            }
        }
    }

    static func milliseconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
    }
}
