#if canImport(Glibc)
import Glibc
#endif
import IMAgentTestKit

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// The pid of the running `imagentd` child, for the watchdog's last resort.
nonisolated(unsafe) var runningDaemonPID: pid_t = 0

/// The release `imagentd` binary as a child process, with a configuration
/// file, token, socket, log and store in a temporary directory of its own.
final class DaemonProcess {
    let directory: String
    let socketPath: String
    private let handle: DaemonHandle
    var pid: pid_t { handle.pid }

    /// The `imagentd` beside this executable.
    static var binaryPath: String { BuiltPrograms.daemon }

    /// When the process was spawned.
    var spawnedAt: ContinuousClock.Instant { handle.startedAt }

    /// Writes the configuration and starts the daemon; returns once its socket accepts connections.
    ///
    /// - Parameters:
    ///   - limits: more keys for the `[limits]` table (e.g. `outbox_messages = 100000`).
    ///   - settings: more TOML tables appended to the configuration (e.g. `[heartbeat]`).
    ///   - notifySocket: `$NOTIFY_SOCKET` for the child; nil starts it without one.
    ///   - directory: an existing directory whose configuration and store to reuse
    ///     (a restart); nil makes a new one.
    ///   - waitForSocket: false returns right after the spawn.
    ///   - server: more keys for the `[server]` table (e.g. `protocol = "mqtt"`).
    init(serverAddress: String, token: String, durability: String, maxSessions: Int, maxClients: Int = 256,
         limits: String = "", settings: String = "", notifySocket: String? = nil, directory reused: String? = nil,
         waitForSocket: Bool = true, server: String = "") async throws {
        if let reused {
            directory = reused
        } else {
            directory = try makeTemporaryDirectory(prefix: "imagent-bench")
        }
        socketPath = directory + "/imagent.sock"
        do {
            try writeFile(directory + "/token", token + "\n")
            var config = DaemonConfigFile(endpoints: [serverAddress], tokenFile: directory + "/token", socketPath: socketPath,
                                          storeDirectory: directory, agentID: "imagent-bench-daemon")
            // Some runs put the server in another network namespace (a test-only address).
            config.allowPlaintext = true
            config.durability = durability
            config.reconnectCapMS = nil
            config.logLevel = "warning"
            config.serverExtra = server
            config.extra = """
                [limits]
                max_sessions = \(maxSessions)
                max_sessions_per_uid = \(maxSessions)
                max_clients = \(maxClients)
                max_clients_per_uid = \(maxClients)
                \(limits)
                \(settings)
                """
            try config.write(to: directory + "/imagentd.toml")
            handle = try await DaemonHandle.start(configPath: directory + "/imagentd.toml", socketPath: socketPath,
                                                  logPath: directory + "/imagentd.log",
                                                  setting: notifySocket.map { ["NOTIFY_SOCKET": $0] } ?? [:],
                                                  waitUntilReady: false)
        } catch {
            if reused == nil { removeDirectory(directory) }
            throw error
        }
        runningDaemonPID = handle.pid
        guard waitForSocket else { return }
        do {
            try await handle.waitUntilAccepting(within: .seconds(10))
        } catch {
            await stop()
            throw error
        }
    }

    var isRunning: Bool { handle.isRunning }

    /// VmRSS and VmHWM (peak) of the daemon in KiB, from /proc/PID/status.
    func memory() -> (rss: Int, peak: Int) { Self.memory(of: pid) }

    static func memory(of pid: pid_t) -> (rss: Int, peak: Int) {
        let fields = statusKiB(of: pid, ["VmRSS", "VmHWM"])
        return (fields[0], fields[1])
    }

    /// Fields of /proc/PID/status in KiB (VmRSS, RssAnon, VmHWM…), -1 for one not there.
    static func statusKiB(of pid: pid_t, _ names: [String]) -> [Int] {
        let status = readFile("/proc/\(pid)/status") ?? ""
        return names.map { name in
            for line in status.split(separator: "\n") where line.hasPrefix(name + ":") {
                return Int(line.dropFirst(name.count + 1).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "") ?? -1
            }
            return -1
        }
    }

    /// What the store directory holds besides the bench's own files: the daemon's database, if it has one.
    func storeFiles() -> [String] {
        listDirectory(directory).filter { !["token", "imagentd.toml", "imagent.sock", "imagentd.log"].contains($0) }.sorted()
    }

    var log: String { readFile(directory + "/imagentd.log") ?? "" }

    /// SIGTERM, then SIGKILL after 5 s; removes the directory unless `keepDirectory`.
    func stop(keepDirectory: Bool = false) async {
        await handle.stop()
        runningDaemonPID = 0
        if !keepDirectory { removeDirectory(directory) }
    }

    /// SIGKILL at once, as a crash would; keeps the directory.
    func kill9() {
        handle.signal(SIGKILL)
        handle.process.waitUntilExit()
        runningDaemonPID = 0
    }
}

/// Removes a directory and everything in it.
func removeDirectory(_ path: String) { removeTree(path) }
