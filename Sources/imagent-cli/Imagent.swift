import AgentIPC
import ArgumentParser

/// `imagent`: query and control `imagentd` over its Unix socket (Agent IPC/1).
///
/// Exit codes (see `ExitStatus`): 0 success, 1 usage, 2 imagentd not running,
/// 3 permission denied, 4 refused by imagentd (its IPC code is printed),
/// 5 timed out, 6 connection failed or broke.
@main
struct Imagent: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "imagent",
        abstract: "Query and control imagentd, the agent that keeps this machine's one link to the IM server.",
        discussion: """
            Every subcommand talks to imagentd over its Unix socket: --socket PATH, else \
            $IMAGENT_SOCKET, else /run/imagent/imagent.sock, else \
            $XDG_RUNTIME_DIR/imagent/imagent.sock. Output is for people unless --json is given, \
            which prints one JSON document (or one JSON object per line for watch, listen, send \
            and ping).

            \(ExitStatus.helpText)
            """,
        version: "0.1.0",
        groupedSubcommands: [
            CommandGroup(name: "Queries", subcommands: [
                StatusCommand.self, WaitOnlineCommand.self, SessionsCommand.self, MetricsCommand.self, WatchCommand.self,
                EventsCommand.self, PingCommand.self, DoctorCommand.self,
            ]),
            CommandGroup(name: "Sessions", subcommands: [
                OpenCommand.self, CloseCommand.self, SendCommand.self, ListenCommand.self,
            ]),
            CommandGroup(name: "Link administration (root or admin group)", subcommands: [
                ConnectCommand.self, DisconnectCommand.self, ReconnectCommand.self, ReloadCommand.self,
            ]),
        ]
    )

    /// Declared here too so that the options may come before the subcommand's
    /// name, as in `imagent --socket PATH status --json`.
    @OptionGroup var options: GlobalOptions

    /// Runs the command and turns every failure into a message on stderr and
    /// one of the documented exit codes. ArgumentParser's own `main` would
    /// exit with 64 for usage errors; scripts are promised 1.
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let error as IPCClientError {
            Output.error(error.description)
            Output.terminate(ExitStatus(for: error).rawValue)
        } catch let failure as CLIFailure {
            Output.error(failure.message)
            Output.terminate(failure.status.rawValue)
        } catch {
            let code = exitCode(for: error)
            if code == .success {
                // --help, --version, --generate-completion-script: ArgumentParser prints them.
                self.exit(withError: error)
            }
            let message = fullMessage(for: error)
            if !message.isEmpty { Output.raw(toStandardError: message + "\n") }
            Output.terminate(code == .validationFailure ? ExitStatus.usage.rawValue : code.rawValue)
        }
    }
}
