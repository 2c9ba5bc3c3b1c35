#if canImport(Glibc)
import Glibc
#endif
import Logging
import NIOCore
import NIOPosix

/// `imagentd`: the connection agent daemon.
///
/// The options are parsed by hand (`DaemonArguments`), not with
/// swift-argument-parser: that package links FoundationEssentials, about 2 MB
/// of resident memory for a daemon that otherwise needs none of it.
///
/// `main` is synchronous so that Swift concurrency's global executor can be
/// replaced before any task runs (see `main()`).
@main
struct IMAgentDaemon {
    /// Runs `asyncMain()` with Swift concurrency's jobs on one NIO thread
    /// instead of libdispatch's worker pool. On Linux, the first worker thread
    /// that libdispatch starts for a global queue also starts its pool monitor,
    /// a timer that wakes the process once a second for as long as it lives
    /// (`_dispatch_workq_monitor_pools`), which an idle daemon measured as
    /// 60 of its 69 context switches a minute. NIO's event loop threads sleep in
    /// `epoll_wait` until there is work.
    static func main() {
        NIOSingletons.groupLoopCountSuggestion = 1
        NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
        let done = MultiThreadedEventLoopGroup.singleton.next().makePromise(of: Void.self)
        Task.detached {
            await asyncMain()
            done.succeed()
        }
        try? done.futureResult.wait()
        exit(0)
    }

    static func asyncMain() async {
        let arguments: DaemonArguments
        do {
            arguments = try DaemonArguments(parsing: Array(CommandLine.arguments.dropFirst()))
        } catch {
            printError("Error: \(error)")
            printError(DaemonArguments.usage)
            exit(64)  // EX_USAGE, as swift-argument-parser exits on a usage error.
        }
        switch arguments.action {
        case .help:
            printLine(DaemonArguments.help)
            exit(0)
        case .version:
            printLine(DaemonCore.version)
            exit(0)
        case .run:
            break
        }
        do {
            try await IMAgentDaemon(arguments).run()
        } catch let exit as DaemonExit {
            Glibc.exit(exit.status)
        } catch {
            printError("imagentd: \(error)")
            exit(1)
        }
    }

    var configPath: String
    var checkConfigPath: String?
    var development: Bool
    var developmentDirectory: String

    init(_ arguments: DaemonArguments) {
        configPath = arguments.configPath
        checkConfigPath = arguments.checkConfigPath
        development = arguments.development
        developmentDirectory = arguments.developmentDirectory
    }

    func run() async throws {
        if let checkConfigPath {
            // EX_CONFIG for every problem, the file's own and what it names on this machine.
            do {
                let text = try ConfigFileReader.read(checkConfigPath)
                let configuration = try ConfigLoader.load(text: text, file: checkConfigPath)
                let problems = ConfigEnvironmentCheck.problems(configuration, text: text, file: checkConfigPath)
                guard problems.isEmpty else { throw ConfigProblems(problems: problems.sorted { $0.line < $1.line }) }
                for warning in SecurityWarnings.of(configuration) { printError("\(checkConfigPath): warning: \(warning)") }
                printLine("\(checkConfigPath): valid")
                if let missing = LinkReadiness.problem(configuration, configPath: checkConfigPath) {
                    // Not an error: the daemon starts unconfigured and waits for a reload.
                    printLine("\(checkConfigPath): note: imagentd will start unconfigured: \(missing)")
                }
                return
            } catch {
                printError("\(error)")
                throw DaemonExit(status: 78)  // EX_CONFIG, as a start on this file would exit
            }
        }

        // Listening sockets from systemd are taken first, before anything could start a child process.
        let passedSockets: [Int32]
        do {
            passedSockets = try SocketActivation.listeningSockets()
        } catch {
            printError("imagentd: \(error)")
            throw DaemonExit(status: 1)
        }
        let logLevel = DaemonLogging.bootstrap(level: .info)
        let logger = Logger(label: "imagentd")
        if development {
            let dev = try await DevelopmentMode.start(directory: developmentDirectory)
            printLine("imagentd (development mode): socket \(dev.configuration.ipc.socket), reference server \(dev.server.address)")
            printLine("try: IMAGENT_SOCKET=\(dev.configuration.ipc.socket) imagent status")
            try await DaemonRunner.run(configuration: dev.configuration, reload: nil, configPath: "development mode",
                                       passedSockets: passedSockets,
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
            throw DaemonExit(status: 78)
        }
        logLevel.level = Logger.Level(configuration.logLevel)
        let path = configPath
        try await DaemonRunner.run(configuration: configuration, reload: { try ConfigFileReader.load(path) },
                                   configPath: path, passedSockets: passedSockets, logLevel: logLevel, logger: logger)
    }
}

/// Ends the process with `status` (after the message was printed).
struct DaemonExit: Error {
    var status: Int32
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
