#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import Logging

/// `imagentd`: the connection agent daemon.
@main
struct IMAgentDaemon: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "imagentd",
        abstract: "Keeps one persistent link to an IM server and shares it with local programs.",
        discussion: """
            Local programs connect to the IPC socket (Agent IPC/1, imagent-ipc(7)); `imagent` \
            queries and controls the daemon. Signals: SIGTERM and SIGINT shut down gracefully, \
            SIGHUP re-reads the configuration. Exit status: 0 after a clean shutdown, 78 when the \
            configuration file is invalid, 1 when the daemon cannot start or run.
            """)

    @Option(name: .customLong("config"), help: ArgumentHelp("Run with this configuration file.", valueName: "file"))
    var configPath = "/etc/imagent/imagentd.toml"

    @Option(name: .customLong("check-config"),
            help: ArgumentHelp("Validate this configuration file and exit: 0 when valid, 1 with file:line errors.", valueName: "file"))
    var checkConfigPath: String?

    @Flag(name: .customLong("dev"), help: "Development mode: no configuration file, an embedded loopback reference server.")
    var development = false

    @Option(name: .customLong("dev-dir"), help: ArgumentHelp("Folder for development mode's state, token and socket.", valueName: "dir"))
    var developmentDirectory = ".dev"

    func run() async throws {
        if let checkConfigPath {
            do {
                _ = try ConfigFileReader.load(checkConfigPath)
                printLine("\(checkConfigPath): valid")
                return
            } catch {
                printError("\(error)")
                throw ExitCode(1)
            }
        }

        // Listening sockets from systemd are taken first, before anything could start a child process.
        let passedSockets: [Int32]
        do {
            passedSockets = try SocketActivation.listeningSockets()
        } catch {
            printError("imagentd: \(error)")
            throw ExitCode(1)
        }
        let logLevel = DaemonLogging.bootstrap(level: .info)
        let logger = Logger(label: "imagentd")
        if development {
            let dev = try await DevelopmentMode.start(directory: developmentDirectory)
            printLine("imagentd (development mode): socket \(dev.configuration.ipc.socket), reference server \(dev.server.address)")
            printLine("try: IMAGENT_SOCKET=\(dev.configuration.ipc.socket) imagent status")
            try await DaemonRunner.run(configuration: dev.configuration, reload: nil, passedSockets: passedSockets,
                                       logLevel: logLevel, logger: logger)
            try await dev.server.stop()
            return
        }

        let configuration: DaemonConfiguration
        do {
            configuration = try ConfigFileReader.load(configPath)
        } catch {
            printError("\(error)")
            printError("imagentd: not started; fix the configuration (check it with `imagentd --check-config \(configPath)`)")
            // EX_CONFIG: the unit does not restart on it (RestartPreventExitStatus), as a restart cannot fix the file.
            throw ExitCode(78)
        }
        logLevel.level = Logger.Level(configuration.logLevel)
        let path = configPath
        try await DaemonRunner.run(configuration: configuration, reload: { try ConfigFileReader.load(path) },
                                   passedSockets: passedSockets, logLevel: logLevel, logger: logger)
    }
}

/// Writes one line to standard error, unbuffered (the `stderr` global is
/// shared mutable state to Swift 6).
func printError(_ text: String) {
    writeLine(text, to: STDERR_FILENO)
}

/// Writes one line to standard output at once: whoever started the daemon
/// (a script, a test) may be waiting for it while the daemon keeps running.
func printLine(_ text: String) {
    writeLine(text, to: STDOUT_FILENO)
}

private func writeLine(_ text: String, to descriptor: CInt) {
    let line = text + "\n"
    _ = line.utf8CString.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count - 1) }
}
