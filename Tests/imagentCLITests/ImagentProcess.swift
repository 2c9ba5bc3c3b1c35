import Foundation
import IMAgentTestKit

/// Runs the built `imagent` binary as a child process, the way a person or a
/// script would, and collects what it printed and its exit status.
enum ImagentProcess {
    struct Result: Sendable {
        var status: Int32
        var stdout: String
        var stderr: String

        var stdoutLines: [String] { stdout.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init) }
    }

    /// The binary sits in the build products directory, next to the test bundle.
    static let binary = URL(fileURLWithPath: BuiltPrograms.cli)

    /// Runs `imagent ARGUMENTS…` with `stdin` as its standard input (nothing,
    /// /dev/null, when nil) and the environment given (IMAGENT_SOCKET removed
    /// unless set there), killing it after `limit`. `executable` replaces
    /// `imagent` for a wrapper that runs it (such as setpriv(1) for another uid).
    static func run(_ arguments: [String], stdin: String? = nil, environment: [String: String] = [:],
                    limit: Duration = .seconds(20), executable: URL = binary) async throws -> Result {
        // A hung child must fail the test, not hang the suite: it is killed after `limit`.
        let output = try await ChildProcess.run(executable.path, arguments, stdin: stdin ?? "",
                                                setting: environment, unsetting: environment["IMAGENT_SOCKET"] == nil ? ["IMAGENT_SOCKET"] : [],
                                                limit: limit)
        return Result(status: output.signaled ? 128 + output.status : output.status, stdout: output.stdout, stderr: output.stderr)
    }

    /// `run` with `--socket` pointing at `daemon`, before the subcommand.
    static func run(_ arguments: [String], against daemon: FakeDaemon, stdin: String? = nil) async throws -> Result {
        try await run(["--socket", daemon.socketPath] + arguments, stdin: stdin)
    }
}
