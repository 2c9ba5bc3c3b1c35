import Foundation
import IMAgentTestKit

/// The real processes of an acceptance run: `imagent-refserver` with a
/// `--state` file and an admin socket, `imagentd` against it, and
/// `imagent-loadgen` clients, all from the build directory, in one temporary
/// folder. Each can be killed and restarted; `stop()` ends every process
/// still running and removes the folder.
final class LoadCluster: @unchecked Sendable {
    let directory: String
    let socketPath: String
    private let configPath: String
    private let tokenPath: String
    private(set) var port = 0
    private(set) var server: ChildProcess?
    private(set) var daemon: ChildProcess?
    private var loadgens: [ChildProcess] = []
    /// TOML tables appended to the daemon's configuration (set before `startDaemon`'s first call).
    var extraConfiguration = ""
    private let lock = NSLock()

    static let binaries = ImagentProcess.binary.deletingLastPathComponent()

    init() throws {
        directory = try FakeDaemon.makeTemporaryDirectory()
        socketPath = directory + "/imagent.sock"
        configPath = directory + "/imagentd.toml"
        tokenPath = directory + "/token"
        try "load-token\n".write(toFile: tokenPath, atomically: true, encoding: .utf8)
    }

    // MARK: Reference server

    /// Starts the reference server: on a free port the first time, on the same port (and state file) after.
    func startServer() async throws {
        let outPath = directory + "/refserver.out"
        let process = try spawn("imagent-refserver",
                                ["--listen", "127.0.0.1:\(port)", "--token-file", tokenPath,
                                 "--state", directory + "/refserver.sqlite3", "--admin-socket", directory + "/admin.sock",
                                 "--log-level", "warning"],
                                stdout: .file(outPath), stderr: .file(directory + "/refserver.log", append: true))
        lock.withLock { server = process }
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline, process.isRunning {
            let out = (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? ""
            if let line = out.split(separator: "\n").first(where: { $0.hasPrefix("listening on ") }),
               let colon = line.lastIndex(of: ":"), let bound = Int(line[line.index(after: colon)...]) {
                port = bound
                return
            }
            try await Task.sleep(for: .milliseconds(25))
        }
        throw RealDaemonError("imagent-refserver did not start; its log:\n\(tail("refserver.log"))")
    }

    /// One admin command on the server's admin socket; its reply line.
    func admin(_ command: String) throws -> String {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let path = Array((directory + "/admin.sock").utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: path.prefix(raw.count - 1))
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else { throw RealDaemonError("admin socket: connect failed, errno \(errno)") }
        let line = Array((command + "\n").utf8)
        _ = line.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        var reply: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 512)
        while !reply.contains(UInt8(ascii: "\n")) {
            let count = read(descriptor, &buffer, buffer.count)
            guard count > 0 else { break }
            reply += buffer[..<count]
        }
        return String(decoding: reply, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// SIGTERM (the server commits what it holds and exits) or SIGKILL (it commits before it
    /// acknowledges, so nothing acknowledged is lost), then the same port and state file again.
    func restartServer(killing: Bool = false) async throws {
        if let server: ChildProcess = lock.withLock({ self.server }) {
            kill(server.processIdentifier, killing ? SIGKILL : SIGTERM)
            try await waitForExit(server, within: .seconds(15))
        }
        try await startServer()
    }

    /// SIGTERM the server and wait for it: the link goes down until `startServer()` (same port, same state).
    func stopServer() async throws {
        if let server: ChildProcess = lock.withLock({ self.server }) {
            kill(server.processIdentifier, SIGTERM)
            try await waitForExit(server, within: .seconds(15))
        }
    }

    /// The daemon's `RssAnon` (/proc/PID/status) in bytes: its heap, not the pages of mapped files.
    func daemonAnonymousRSS() -> Int? {
        guard let daemon: ChildProcess = lock.withLock({ self.daemon }), daemon.isRunning,
              let status = try? String(contentsOfFile: "/proc/\(daemon.processIdentifier)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("RssAnon:") }),
              let kib = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first.flatMap({ Int($0) }) else { return nil }
        return kib * 1024
    }

    // MARK: Daemon

    func startDaemon() async throws {
        if !FileManager.default.fileExists(atPath: configPath) {
            try """
                [server]
                endpoints = ["127.0.0.1:\(port)"]
                tls = false
                agent_id = "load-acceptance"
                [auth]
                token_file = "\(tokenPath)"
                [ipc]
                socket = "\(socketPath)"
                mode = "0600"
                [store]
                directory = "\(directory)"
                [heartbeat]
                min_seconds = 1
                max_seconds = 2
                [reconnect]
                base_ms = 100
                cap_ms = 500
                [network]
                watch = false
                [log]
                level = "warning"
                \(extraConfiguration)
                """.write(toFile: configPath, atomically: true, encoding: .utf8)
        }
        // A killed daemon leaves its socket file; waiting for it to exist must mean the new one's.
        try? FileManager.default.removeItem(atPath: socketPath)
        let log = directory + "/imagentd.log"
        let process = try spawn("imagentd", ["--config", configPath], stdout: .file(log, append: true), stderr: .file(log, append: true))
        lock.withLock { daemon = process }
        for _ in 0..<600 where !FileManager.default.fileExists(atPath: socketPath) {
            guard process.isRunning else { break }
            try await Task.sleep(for: .milliseconds(25))
        }
        guard FileManager.default.fileExists(atPath: socketPath) else {
            throw RealDaemonError("imagentd did not create its socket; its log:\n\(tail("imagentd.log"))")
        }
    }

    /// `kill -9` the daemon, then start it again on the same store.
    func killAndRestartDaemon() async throws {
        if let daemon: ChildProcess = lock.withLock({ self.daemon }) {
            kill(daemon.processIdentifier, SIGKILL)
            try await waitForExit(daemon, within: .seconds(10))
        }
        try await startDaemon()
    }

    // MARK: Load clients

    /// Starts one `imagent-loadgen` against the daemon; `wait` returns its report.
    func startLoadgen(tag: Int, arguments: [String]) throws -> Loadgen {
        let outPath = directory + "/loadgen-\(tag).out", errPath = directory + "/loadgen-\(tag).err"
        let process = try spawn("imagent-loadgen", ["--socket", socketPath, "--tag", "\(tag)"] + arguments,
                                stdout: .file(outPath), stderr: .file(errPath, append: true))
        lock.withLock { loadgens.append(process) }
        return Loadgen(process: process, outPath: outPath, errPath: errPath)
    }

    struct Loadgen: Sendable {
        let process: ChildProcess
        let outPath: String
        let errPath: String

        var isRunning: Bool { process.isRunning }

        /// Waits for the process to exit (killing it after `limit`) and parses its JSON line.
        func wait(within limit: Duration) async throws -> LoadReport {
            let deadline = ContinuousClock.now + limit
            while process.isRunning, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
            if process.isRunning {
                kill(process.processIdentifier, SIGKILL)
                throw RealDaemonError("imagent-loadgen \(process.processIdentifier) still ran after \(limit)")
            }
            let out = (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? ""
            let err = (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""
            guard let line = out.split(separator: "\n").last,
                  let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                throw RealDaemonError("imagent-loadgen printed no report (status \(process.terminationStatus)): \(out)\n\(err)")
            }
            return LoadReport(json: String(line), fields: object, status: process.terminationStatus, stderr: err)
        }
    }

    struct LoadReport: Sendable {
        let json: String
        nonisolated(unsafe) let fields: [String: Any]
        let status: Int32
        let stderr: String

        func int(_ key: String) -> Int { (fields[key] as? NSNumber)?.intValue ?? -1 }
        func double(_ key: String) -> Double { (fields[key] as? NSNumber)?.doubleValue ?? -1 }
    }

    // MARK: Clean-up and diagnostics

    /// Ends every process this cluster started that still runs, and removes the folder.
    func stop() async {
        let all: [ChildProcess] = lock.withLock { loadgens }
        let daemon: ChildProcess? = lock.withLock { self.daemon }
        let server: ChildProcess? = lock.withLock { self.server }
        for process in all where process.isRunning { kill(process.processIdentifier, SIGKILL) }
        if let daemon, daemon.isRunning {
            daemon.terminate()
            if (try? await waitForExit(daemon, within: .seconds(5))) == nil { kill(daemon.processIdentifier, SIGKILL) }
        }
        if let server, server.isRunning {
            server.terminate()
            if (try? await waitForExit(server, within: .seconds(5))) == nil { kill(server.processIdentifier, SIGKILL) }
        }
        for process in all { try? await waitForExit(process, within: .seconds(5)) }
        try? FileManager.default.removeItem(atPath: directory)
    }

    func tail(_ file: String, bytes: Int = 3000) -> String {
        String(((try? String(contentsOfFile: directory + "/" + file, encoding: .utf8)) ?? "").suffix(bytes))
    }

    private func waitForExit(_ process: ChildProcess, within limit: Duration) async throws {
        if await process.exit(within: limit) == nil {
            throw RealDaemonError("process \(process.processIdentifier) did not exit within \(limit)")
        }
    }

    /// One of the built binaries, with no systemd or client variables of this process.
    private func spawn(_ binary: String, _ arguments: [String], stdout: ChildProcess.Stream,
                       stderr: ChildProcess.Stream) throws -> ChildProcess {
        try ChildProcess(executable: Self.binaries.appendingPathComponent(binary).path, arguments: arguments,
                         setting: ["SWIFT_BACKTRACE": "enable=no"], unsetting: ["NOTIFY_SOCKET", "IMAGENT_SOCKET"],
                         stdout: stdout, stderr: stderr)
    }
}

/// Runs `body` with a new cluster (server and daemon started) and always stops it.
func withLoadCluster<Result>(configuration: String = "", _ body: (LoadCluster) async throws -> Result) async throws -> Result {
    let cluster = try LoadCluster()
    cluster.extraConfiguration = configuration
    do {
        try await cluster.startServer()
        try await cluster.startDaemon()
        let result = try await body(cluster)
        await cluster.stop()
        return result
    } catch {
        await cluster.stop()
        throw error
    }
}
