#if canImport(Glibc)
import Glibc
#endif
import AgentStore
import Logging

/// What `imagentd` does once its command line is parsed: check a
/// configuration file or a stopped daemon's store, or run the daemon (from
/// a file, or in development mode). The executable keeps `main` and the argument parsing; everything
/// after them lives here, in the library the tests exercise.
public struct DaemonMain {
    /// The version `imagentd --version` prints.
    public static let version = DaemonCore.version

    var configPath: String
    var checkConfigPath: String?
    var checkStore: Bool
    var development: Bool
    var developmentDirectory: String

    public init(configPath: String, checkConfigPath: String?, checkStore: Bool = false, development: Bool,
                developmentDirectory: String) {
        self.configPath = configPath
        self.checkConfigPath = checkConfigPath
        self.checkStore = checkStore
        self.development = development
        self.developmentDirectory = developmentDirectory
    }

    /// Returns when the daemon stopped; throws `DaemonExit` when the process must end with a status.
    public func run() async throws {
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
        if checkStore {
            let status = StoreCheck.run(configPath: configPath)
            guard status == 0 else { throw DaemonExit(status: status) }
            return
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
            let dev = try DevelopmentMode.start(directory: developmentDirectory)
            printLine("imagentd (development mode): socket \(dev.configuration.ipc.socket), reference server \(dev.server.address)")
            printLine("try: IMAGENT_SOCKET=\(dev.configuration.ipc.socket) imagent status")
            try await withStore(of: dev.configuration, configPath: nil, logger: logger) {
                try await DaemonRunner.run(configuration: dev.configuration, reload: nil, configPath: "development mode",
                                           passedSockets: passedSockets,
                                           logLevel: logLevel, logger: logger)
            }
            dev.server.stop()
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
        try await withStore(of: configuration, configPath: path, logger: logger) {
            try await DaemonRunner.run(configuration: configuration, reload: { try ConfigFileReader.load(path) },
                                       configPath: path, passedSockets: passedSockets, logLevel: logLevel, logger: logger)
        }
    }

    /// Runs `daemon` with the store set up and locked for its lifetime, and
    /// turns what no restart can fix into exit statuses: a store directory or
    /// file that is not as it must be (78, as an invalid configuration), a
    /// damaged database (`StoreCheck.damagedStatus`).
    private func withStore(of configuration: DaemonConfiguration, configPath: String?, logger: Logger,
                           _ daemon: () async throws -> Void) async throws {
        let directory = configuration.store.directory
        let database = SQLiteSessionPersistence.path(inDirectory: directory)
        let lock: StoreLock
        do {
            // Here and not only in DaemonRunner: the lock needs the directory, and the
            // checks' failures need their exit status. Running them again there changes nothing.
            for warning in try StoreFiles.prepare(directory: directory, database: database) { logger.warning("\(warning)") }
            lock = try StoreLock.acquire(directory: directory)
        } catch let error as StoreFilesError where error.isSetup {
            printError("imagentd: not started: \(error)")
            throw DaemonExit(status: 78)
        } catch StoreLock.Failure.inUse {
            printError("imagentd: not started: the store \(directory) is in use by another process (an imagentd, or "
                + "imagentd --check-store); stop it first, or give this daemon a [store] directory of its own")
            throw DaemonExit(status: 1)
        } catch {
            printError("imagentd: not started: \(error)")
            throw DaemonExit(status: 1)
        }
        defer { lock.release() }
        do {
            try await daemon()
        } catch let error as StoreFilesError where error.isSetup {
            printError("imagentd: not started: \(error)")
            throw DaemonExit(status: 78)
        } catch let error where error is StoreError || error is SessionPersistenceError {
            // Whether the file is damaged, SQLite says, whichever layer reported the failure.
            guard case .damaged(let problems)? = try? StoreIntegrity.check(path: database, quick: true) else { throw error }
            printError("imagentd: \(error)")
            printError(StoreCheck.damagedAtStart(database: database, problems: problems, configPath: configPath))
            throw DaemonExit(status: StoreCheck.damagedStatus)
        }
    }
}

/// Ends the process with `status` (after the message was printed).
public struct DaemonExit: Error {
    public var status: Int32
}

/// Writes one line to standard error, unbuffered (the `stderr` global is
/// shared mutable state to Swift 6).
public func printError(_ text: String) {
    writeLine(text, to: STDERR_FILENO)
}

/// Writes one line to standard output at once: whoever started the daemon
/// (a script, a test) may be waiting for it while the daemon keeps running.
public func printLine(_ text: String) {
    writeLine(text, to: STDOUT_FILENO)
}

private func writeLine(_ text: String, to descriptor: CInt) {
    let line = text + "\n"
    _ = line.utf8CString.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count - 1) }
}
