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
        help: ArgumentHelp("Seconds to wait for each answer from imagentd; 0 waits forever.", valueName: "seconds"))
    var timeout: Double = 10

    func validate() throws {
        guard timeout >= 0, timeout.isFinite else {
            throw ValidationError("--timeout must be a number of seconds, 0 or more")
        }
    }

    var requestTimeout: Duration? {
        timeout == 0 ? nil : .milliseconds(Int64((timeout * 1000).rounded(.up)))
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
