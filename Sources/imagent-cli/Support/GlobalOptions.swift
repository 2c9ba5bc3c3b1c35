import AgentIPC
import ArgumentParser

/// The options every subcommand takes, before or after its name
/// (`imagent --socket PATH status --json` and `imagent status --socket PATH --json`).
struct GlobalOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "The daemon's socket. Default: $IMAGENT_SOCKET, else /run/imagent/imagent.sock, "
                + "else $XDG_RUNTIME_DIR/imagent/imagent.sock.",
            valueName: "path"))
    var socket: String?

    @Flag(name: .long, help: "Print JSON for scripts instead of text for people.")
    var json = false

    @Option(
        name: .long,
        help: ArgumentHelp("Seconds to wait for each answer from imagentd (default 10; for wait-online: for the link, "
                               + "default 30); 0 waits forever.", valueName: "seconds"))
    var timeout: Double?

    func validate() throws {
        if let timeout, !(timeout >= 0 && timeout.isFinite) {
            throw ValidationError("--timeout must be a number of seconds, 0 or more")
        }
    }

    /// `--timeout` as given, else 10 seconds: how long each answer may take.
    var answerSeconds: Double { timeout ?? 10 }

    var requestTimeout: Duration? {
        answerSeconds == 0 ? nil : .milliseconds(Int64((answerSeconds * 1000).rounded(.up)))
    }

    /// Connects and says HELLO; the client's name tells the daemon's log
    /// which subcommand this is.
    func connect(for subcommand: String) async throws -> IPCClient {
        try await IPCClient.connect(socketPath: socket, clientName: "imagent \(subcommand)", timeout: requestTimeout)
    }

    /// Runs `body` with a connected client and closes it afterwards, whether
    /// `body` succeeds or throws.
    func withClient<Result>(for subcommand: String,
                            _ body: (IPCClient) async throws -> Result) async throws -> Result {
        let client = try await connect(for: subcommand)
        do {
            let result = try await body(client)
            await client.close()
            return result
        } catch {
            await client.close()
            throw error
        }
    }
}
