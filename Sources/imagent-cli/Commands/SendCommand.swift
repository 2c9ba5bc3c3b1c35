import AgentIPC
import ArgumentParser
import NIOCore

/// `imagent send`: hand messages to the daemon for one session.
struct SendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Send a message on a session and print the seq imagentd accepted it under.",
        discussion: """
            The message is the MESSAGE argument, else all of standard input; with --lines, each \
            line of standard input is one message (sent as soon as it is read; empty lines are \
            skipped). Accepted means durably stored: imagentd delivers it to the server exactly \
            once, even across restarts, unless --ttl runs out first. The session is not attached, \
            so this works while `imagent listen` reads the same session.
            """)

    @OptionGroup var options: GlobalOptions

    @Argument(help: ArgumentHelp("The session to send on.", valueName: "session"))
    var session: UInt64

    @Argument(help: ArgumentHelp("The message (UTF-8). Without it, standard input is read.", valueName: "message"))
    var message: String?

    @Flag(help: "Send each line of standard input as its own message.")
    var lines = false

    @Option(help: ArgumentHelp("Give each message up if it cannot reach the server within this many seconds.",
                               valueName: "seconds"))
    var ttl: Double?

    func validate() throws {
        if message != nil && lines {
            throw ValidationError("--lines reads standard input; leave out the MESSAGE argument")
        }
        if let ttl, !(ttl > 0 && ttl.isFinite) {
            throw ValidationError("--ttl must be a number of seconds above 0")
        }
    }

    func run() async throws {
        let ttl = ttl.map { Duration.milliseconds(Int64(($0 * 1000).rounded(.up))) }
        try await options.withClient(for: "send") { client in
            if let message {
                try await send(ByteBuffer(string: message), client: client, ttl: ttl)
            } else if lines {
                var input = StandardInput()
                while let line = try input.nextLine() {
                    guard !line.isEmpty else { continue }
                    try await send(ByteBuffer(bytes: line), client: client, ttl: ttl)
                }
            } else {
                if StandardInput.isTerminal {
                    Output.error("reading the message from standard input; end it with Ctrl-D")
                }
                var input = StandardInput()
                try await send(ByteBuffer(bytes: try input.readAll()), client: client, ttl: ttl)
            }
        }
    }

    private func send(_ payload: ByteBuffer, client: IPCClient, ttl: Duration?) async throws {
        let seq = try await client.send(session: session, payload: payload, ttl: ttl)
        if options.json {
            Output.json(.object(["session": .integer(session), "seq": .integer(seq)]))
        } else {
            Output.line("session \(session): accepted seq \(seq)")
        }
    }
}
