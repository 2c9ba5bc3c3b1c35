/// `imagentd`'s command line: five options, `--help` and `--version`.
///
/// Options take their value as the next argument or after `=`
/// (`--config FILE`, `--config=FILE`); the last of a repeated option wins.
struct DaemonArguments: Equatable {
    enum Action: Equatable {
        case run
        case help
        case version
    }

    var action = Action.run
    var configPath = "/etc/imagent/imagentd.toml"
    var checkConfigPath: String?
    var checkStore = false
    var development = false
    var developmentDirectory = ".dev"

    struct UsageError: Error, CustomStringConvertible {
        var description: String
    }

    init(parsing arguments: [String]) throws(UsageError) {
        var remaining = arguments[...]
        while let argument = remaining.popFirst() {
            let (name, attached) = Self.split(argument)
            func value() throws(UsageError) -> String {
                if let attached { return attached }
                guard let next = remaining.popFirst(), !next.hasPrefix("--") else {
                    throw UsageError(description: "Missing value for '\(name) <\(name == "--dev-dir" ? "dir" : "file")>'")
                }
                return next
            }
            switch name {
            case "--config": configPath = try value()
            case "--check-config": checkConfigPath = try value()
            case "--check-store" where attached == nil: checkStore = true
            case "--dev-dir": developmentDirectory = try value()
            case "--dev" where attached == nil: development = true
            case "-h": action = .help
            case "--help" where attached == nil: action = .help
            case "--version" where attached == nil: action = .version
            default:
                if argument.hasPrefix("-") { throw UsageError(description: "Unknown option '\(argument)'") }
                throw UsageError(description: "Unexpected argument '\(argument)'")
            }
        }
    }

    private static func split(_ argument: String) -> (String, String?) {
        guard argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") else { return (argument, nil) }
        return (String(argument[..<equals]), String(argument[argument.index(after: equals)...]))
    }

    static let usage = """
        Usage: imagentd [--config <file>] [--check-config <file>] [--check-store] [--dev] [--dev-dir <dir>]
          See 'imagentd --help' for more information.
        """

    static let help = """
        OVERVIEW: Keeps one persistent link to an IM server and shares it with local programs.

        Local programs connect to the IPC socket (Agent IPC/1, imagent-ipc(7)); `imagent` queries and controls \
        the daemon. Signals: SIGTERM and SIGINT shut down gracefully, SIGHUP re-reads the configuration. Exit \
        status: 0 after a clean shutdown, 78 when the configuration file or the store directory is invalid, 65 \
        when the store database is damaged, 1 when the daemon cannot start or run.

        USAGE: imagentd [--config <file>] [--check-config <file>] [--check-store] [--dev] [--dev-dir <dir>]

        OPTIONS:
          --config <file>         Run with this configuration file. (default: /etc/imagent/imagentd.toml)
          --check-config <file>   Check this configuration file and what it names (readable files, the store
                                  directory, groups) and exit: 0 when valid, 78 with file:line errors.
          --check-store           Check the store of the --config file with SQLite's integrity check and exit:
                                  0 when sound, 65 when damaged. The daemon must be stopped.
          --dev                   Development mode: no configuration file, the imagent-refserver beside imagentd on loopback.
          --dev-dir <dir>         Folder for development mode's state, token and socket. (default: .dev)
          --version               Show the version.
          -h, --help              Show help information.
        """
}
