#if canImport(Glibc)
import Glibc
#endif

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
    let pid: pid_t
    private var exited = false

    /// The `imagentd` beside this executable.
    static var binaryPath: String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        let path = length > 0 ? String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
                              : CommandLine.arguments[0]
        return (path.lastIndex(of: "/").map { String(path[..<$0]) } ?? ".") + "/imagentd"
    }

    /// When the process was spawned.
    let spawnedAt: ContinuousClock.Instant

    /// Writes the configuration and starts the daemon; returns once its socket exists.
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
            var template = Array("/tmp/imagent-bench-XXXXXX".utf8CString)
            guard let made = mkdtemp(&template) else { throw BenchError("mkdtemp failed") }
            directory = String(cString: made)
        }
        socketPath = directory + "/imagent.sock"
        do {
            try writeFile(directory + "/token", token + "\n")
            try writeFile(directory + "/imagentd.toml", """
                [server]
                endpoints = ["\(serverAddress)"]
                tls = false
                # Some runs put the server in another network namespace (a test-only address).
                allow_plaintext = true
                agent_id = "imagent-bench-daemon"
                \(server)
                [auth]
                token_file = "\(directory)/token"
                [ipc]
                socket = "\(socketPath)"
                mode = "0600"
                [store]
                directory = "\(directory)"
                durability = "\(durability)"
                [limits]
                max_sessions = \(maxSessions)
                max_sessions_per_uid = \(maxSessions)
                max_clients = \(maxClients)
                max_clients_per_uid = \(maxClients)
                \(limits)
                [log]
                level = "warning"
                [network]
                watch = false
                \(settings)
                """)
            spawnedAt = .now
            pid = try spawn(Self.binaryPath, ["--config", directory + "/imagentd.toml"], output: directory + "/imagentd.log",
                            notifySocket: notifySocket, appendOutput: reused != nil)
        } catch {
            if reused == nil { removeDirectory(directory) }
            throw error
        }
        runningDaemonPID = pid
        guard waitForSocket else { return }
        for _ in 0..<400 where access(socketPath, F_OK) != 0 && isRunning {
            try? await Task.sleep(for: .milliseconds(25))
        }
        guard access(socketPath, F_OK) == 0 else {
            let log = readFile(directory + "/imagentd.log") ?? ""
            await stop()
            throw BenchError("imagentd did not create its socket; its log:\n\(log)")
        }
    }

    var isRunning: Bool {
        if exited { return false }
        var status: CInt = 0
        if waitpid(pid, &status, WNOHANG) == pid { exited = true }
        return !exited
    }

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
        if isRunning {
            kill(pid, SIGTERM)
            for _ in 0..<250 where isRunning { try? await Task.sleep(for: .milliseconds(20)) }
        }
        kill9()
        if !keepDirectory { removeDirectory(directory) }
    }

    /// SIGKILL at once, as a crash would; keeps the directory.
    func kill9() {
        if isRunning {
            kill(pid, SIGKILL)
            var status: CInt = 0
            waitpid(pid, &status, 0)
            exited = true
        }
        runningDaemonPID = 0
    }
}

// MARK: Small POSIX helpers

/// posix_spawn with stdout and stderr to `output` (appended to with `appendOutput`),
/// with `$NOTIFY_SOCKET` set to `notifySocket` or unset.
func spawn(_ path: String, _ arguments: [String], output: String, notifySocket: String? = nil,
           appendOutput: Bool = false) throws -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | (appendOutput ? O_APPEND : O_TRUNC), 0o644)
    posix_spawn_file_actions_adddup2(&actions, 1, 2)
    var environment: [String] = ["SWIFT_BACKTRACE=enable=no"] + (notifySocket.map { ["NOTIFY_SOCKET=" + $0] } ?? [])
    var entry = environ
    while let variable = entry.pointee {
        let text = String(cString: variable)
        if !text.hasPrefix("NOTIFY_SOCKET="), !text.hasPrefix("SWIFT_BACKTRACE=") { environment.append(text) }
        entry += 1
    }
    let argv = ([path] + arguments).map { strdup($0) } + [nil]
    let envp = environment.map { strdup($0) } + [nil]
    defer { (argv + envp).forEach { free($0) } }
    // The child starts with no signal blocked or ignored: this process's threads may
    // block some, and a child that inherits that mask never sees SIGTERM.
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var none = sigset_t()
    sigemptyset(&none)
    var defaults = sigset_t()
    for signal in [SIGTERM, SIGINT, SIGHUP, SIGPIPE] { sigaddset(&defaults, signal) }
    posix_spawnattr_setsigmask(&attributes, &none)
    posix_spawnattr_setsigdefault(&attributes, &defaults)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    var pid: pid_t = 0
    let result = posix_spawn(&pid, path, &actions, &attributes, argv, envp)
    guard result == 0 else { throw BenchError("cannot start \(path): \(String(cString: strerror(result)))") }
    return pid
}

func writeFile(_ path: String, _ text: String) throws {
    guard let file = fopen(path, "w") else { throw BenchError("cannot write \(path)") }
    defer { fclose(file) }
    guard fputs(text, file) >= 0 else { throw BenchError("cannot write \(path)") }
}

func readFile(_ path: String) -> String? {
    guard let file = fopen(path, "r") else { return nil }
    defer { fclose(file) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65_536)
    while true {
        let count = fread(&chunk, 1, chunk.count, file)
        if count <= 0 { break }
        bytes += chunk[..<count]
    }
    return String(decoding: bytes, as: UTF8.self)
}

func listDirectory(_ path: String) -> [String] {
    guard let directory = opendir(path) else { return [] }
    defer { closedir(directory) }
    var names: [String] = []
    while let entry = readdir(directory) {
        let name = withUnsafePointer(to: &entry.pointee.d_name) {
            String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self))
        }
        if name != ".", name != ".." { names.append(name) }
    }
    return names
}

/// Removes a directory and everything in it.
func removeDirectory(_ path: String) {
    for name in listDirectory(path) {
        let child = path + "/" + name
        if unlink(child) != 0 { removeDirectory(child) }
    }
    rmdir(path)
}
