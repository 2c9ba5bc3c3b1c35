import AgentStore

/// What an operator does about a damaged store: `imagentd --check-store`,
/// which runs SQLite's integrity check on a stopped daemon's store, and the
/// message a start that found the store damaged ends with. Both end with
/// `damagedStatus`, which the packaged units list in RestartPreventExitStatus=:
/// restarting cannot repair a file.
enum StoreCheck {
    /// EX_DATAERR.
    static let damagedStatus: Int32 = 65

    /// Checks the store `configPath` names; prints the verdict and returns the exit status:
    /// 0 sound, `damagedStatus` damaged, 78 an invalid configuration, 1 when it cannot check.
    static func run(configPath: String) -> Int32 {
        let configuration: DaemonConfiguration
        do {
            configuration = try ConfigFileReader.load(configPath)
        } catch {
            printError("\(error)")
            return 78
        }
        let directory = configuration.store.directory
        let database = SQLiteSessionPersistence.path(inDirectory: directory)
        let lock: StoreLock
        do {
            lock = try StoreLock.acquire(directory: directory)
        } catch .inUse {
            printError("imagentd: \(directory) is in use by a running imagentd, which holds its store open; "
                + "stop it first (systemctl stop imagentd, or imagentd@NAME), then check again")
            return 1
        } catch {
            printError("imagentd: \(error); nothing to check ([store] directory in \(configPath))")
            return 1
        }
        defer { lock.release() }
        do {
            switch try StoreIntegrity.check(path: database) {
            case .sound:
                printLine("\(database): ok")
                return 0
            case .damaged(let problems):
                printLine("\(database): damaged")
                for problem in problems { printLine("  \(problem)") }
                printError("imagentd: \(remedy(database))")
                return damagedStatus
            }
        } catch {
            printError("imagentd: cannot check \(database): \(error)")
            return 1
        }
    }

    /// The start's last words when its store is damaged.
    static func damagedAtStart(database: String, problems: [String], configPath: String?) -> String {
        let check = configPath.map { "check it with `imagentd --check-store --config \($0)`, then " } ?? ""
        return "imagentd: not started: the store database \(database) is damaged (\(problems.first ?? "SQLite found it damaged")); "
            + "restarting cannot repair it (exit status \(damagedStatus)): \(check)\(remedy(database))"
    }

    private static func remedy(_ database: String) -> String {
        "restore \(database) from a backup, or move it aside with its -wal and -shm files "
            + "(the next start begins with an empty store: queued messages and sessions are lost)"
    }
}
