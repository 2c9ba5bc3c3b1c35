import Foundation
import IMAgentTestKit
import Testing

/// The three client libraries of the conformance suite and how to run their drivers
/// (clients/conformance/README.md).
enum ClientLibrary: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case swift, c, python

    var testDescription: String { rawValue }

    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path
    /// The system's interpreter, not one under /root (pyenv): the driver also runs as uid 65534.
    static let pythonInterpreter = "/usr/bin/python3"

    /// The program to run, the arguments before the driver's own, and its environment.
    var command: (executable: String, arguments: [String], setting: [String: String]) {
        switch self {
        case .swift:
            (BuiltPrograms.path("imagent-conformance"), [], [:])
        case .c:
            // A sanitizer finding must fail the driver (non-zero status), not scroll by.
            (Self.root + "/clients/c/build-sanitize/imagent-conformance-c", [],
             ["ASAN_OPTIONS": "detect_leaks=1:abort_on_error=1", "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1"])
        case .python:
            (Self.pythonInterpreter, [Self.root + "/clients/python/tests/conformance_driver.py"],
             ["PYTHONPATH": Self.root + "/clients/python/src"])
        }
    }

    /// Why the driver cannot run, with how to build it; nil when it is there.
    var missing: String? {
        switch self {
        case .swift:
            access(command.executable, X_OK) == 0 ? nil
                : "\(command.executable) is not built: run `swift build --build-tests` (the test target depends on it)"
        case .c:
            access(command.executable, X_OK) == 0 ? nil
                : "\(command.executable) is not built: run `make -C clients/c sanitize` (scripts/test does)"
        case .python:
            access(Self.pythonInterpreter, X_OK) != 0 ? "\(Self.pythonInterpreter) is missing: scripts/bootstrap installs python3"
                : access(command.arguments[0], R_OK) == 0 ? nil
                : "\(command.arguments[0]) is missing: the imagent Python package's driver (clients/python)"
        }
    }
}

/// What a driver printed and how it ended.
struct DriverRun {
    var status: Int32
    var signaled: Bool
    /// Killed by the harness for running over its limit.
    var overran: Bool
    /// Every JSON line, events and report.
    var lines: [[String: Any]]
    var stdout: String
    var stderr: String
    var elapsed: Duration

    /// The last line, when it names the scenario.
    var report: [String: Any]? {
        guard let last = lines.last, last["scenario"] != nil else { return nil }
        return last
    }

    func int(_ key: String) -> Int? { (report?[key] as? NSNumber)?.intValue }
    func uint64(_ key: String) -> UInt64? { (report?[key] as? NSNumber)?.uint64Value }
    func string(_ key: String) -> String? { report?[key] as? String }
    func bool(_ key: String) -> Bool? {
        // JSON true or false, not a number: Foundation reads those as a char NSNumber.
        guard let number = report?[key] as? NSNumber, String(cString: number.objCType) == "c" else { return nil }
        return number.boolValue
    }
    var errors: [String: Int] { (report?["errors"] as? [String: Any])?.compactMapValues { ($0 as? NSNumber)?.intValue } ?? [:] }
    var seconds: Double { conformanceSeconds(elapsed) }

    /// For failure messages: the report, or what the driver printed.
    var diagnosis: String {
        let out = report.map { _ in stdout.split(separator: "\n").last.map(String.init) ?? "" } ?? String(stdout.suffix(2000))
        return "\(overran ? "killed for running over its limit: " : "")exit \(signaled ? "signal " : "")\(status) after \(String(format: "%.1f", seconds)) s; stdout: \(out)\nstderr: \(stderr.suffix(3000))"
    }
}

/// An `imagent-refserver` child and an `imagentd` child in one temporary folder. The server's port
/// is reserved (bound, not listening: connections are refused) until it first starts, so the
/// daemon can be started against a server that is down; the daemon restarts on the same store.
final class ConformanceCluster: @unchecked Sendable {
    let directory: String
    let port: Int
    var socketPath: String { directory + "/imagent.sock" }
    private var tokenPath: String { directory + "/token" }
    private let reservation: PortReservation
    private let maxFrame: Int?
    private(set) var server: RefServerHandle?
    private let setup: RealDaemon.Setup
    private(set) var daemon: RealDaemon?

    /// - Parameters:
    ///   - extraConfig: more tables for the daemon (`[limits]`).
    ///   - maxFrame: MAX_FRAME of both the server and the daemon (`[server] max_frame_bytes`).
    ///   - socketMode: `[ipc] mode`; 0666 (and the folder 0711) lets another uid connect.
    init(extraConfig: String = "", maxFrame: Int? = nil, socketMode: String = "0600") async throws {
        directory = try makeTemporaryDirectory(prefix: "imagent-conformance")
        reservation = try PortReservation()
        port = reservation.port
        self.maxFrame = maxFrame
        setup = try await RealDaemon.prepare(.external("127.0.0.1:\(port)"), in: directory, token: "conformance-token") { config in
            config.agentID = "conformance"
            config.socketMode = socketMode
            // Survives the daemon's kill -9, the one crash the suite causes, without an fsync per SEND.
            config.durability = "process"
            if let maxFrame { config.serverExtra = "max_frame_bytes = \(maxFrame)" }
            config.extra = extraConfig
        }
    }

    func startServer() async throws {
        reservation.release()
        var arguments = ["--token-file", tokenPath, "--state", directory + "/refserver.sqlite3", "--log-level", "warning"]
        if let maxFrame { arguments += ["--max-frame", "\(maxFrame)"] }
        server = try await RefServerHandle.start(port: port, arguments: arguments, outPath: directory + "/refserver.out",
                                                 logPath: directory + "/refserver.log")
    }

    /// Starts (or, after `killDaemon`, restarts) the daemon on the same configuration, store and socket.
    func startDaemon() async throws {
        daemon = try await RealDaemon.launch(setup, RealDaemon.Start(readyWithin: .seconds(15)))
    }

    func killDaemon() async { await daemon?.handle.kill9() }

    /// Ends both programs; removes the folder, or keeps it and prints the logs' ends.
    func stop(keepingFiles: Bool) async {
        await daemon?.handle.stop()
        await server?.stop()
        reservation.release()
        if keepingFiles {
            print("conformance: files kept in \(directory); imagentd.log ends with:\n\(tailOfFile(directory + "/imagentd.log"))")
        } else {
            removeTree(directory)
        }
    }

    /// Runs `library`'s driver for `scenario` against this daemon until it exits (killed after
    /// `limit`), handing each event line to `onEvent` as it comes.
    func run(_ library: ClientLibrary, _ scenario: String, _ arguments: [String] = [], asUID uid: UInt32? = nil,
             limit: Duration = .seconds(150), onEvent: ([String: Any]) async throws -> Void = { _ in }) async throws -> DriverRun {
        var (executable, prefix, setting) = library.command
        var all = prefix + ["--socket", socketPath, scenario] + arguments
        if let uid {
            all = ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", executable] + all
            executable = "/usr/bin/setpriv"
        }
        let name = "\(library.rawValue)-\(scenario)-\(UInt64.random(in: 0..<1 << 32))"
        let (outPath, errPath) = (directory + "/\(name).out", directory + "/\(name).err")
        let start = ContinuousClock.now
        let child = try ChildProcess(executable: executable, arguments: all, setting: setting, unsetting: ["IMAGENT_SOCKET"],
                                     stdout: .file(outPath), stderr: .file(errPath))
        var lines: [[String: Any]] = []
        var seen = 0
        func readLines() async throws {
            let complete = (readFile(outPath) ?? "").split(separator: "\n", omittingEmptySubsequences: false).dropLast()
            while seen < complete.count {
                let text = complete[complete.startIndex + seen]
                seen += 1
                let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
                lines.append(object ?? ["unparsed": String(text)])
                if let object, object["event"] != nil { try await onEvent(object) }
            }
        }
        while child.isRunning, ContinuousClock.now - start < limit {
            try await readLines()
            try await Task.sleep(for: .milliseconds(20))
        }
        let overran = child.isRunning
        if overran {
            child.signal(SIGKILL)
            _ = await child.exit(within: .seconds(10))
        }
        try await readLines()
        return DriverRun(status: child.terminationStatus, signaled: child.terminationReason == .uncaughtSignal, overran: overran, lines: lines,
                         stdout: readFile(outPath) ?? "", stderr: readFile(errPath) ?? "", elapsed: ContinuousClock.now - start)
    }
}

/// Runs `body` with a new cluster and always stops it; a failure keeps its files. Prints how long
/// `scenario` took for `library`, everything included.
func withConformanceCluster(_ library: ClientLibrary, _ scenario: String, extraConfig: String = "", maxFrame: Int? = nil,
                            socketMode: String = "0600", _ body: (ConformanceCluster) async throws -> Void) async throws {
    let start = ContinuousClock.now
    let cluster = try await ConformanceCluster(extraConfig: extraConfig, maxFrame: maxFrame, socketMode: socketMode)
    do {
        try await body(cluster)
        await cluster.stop(keepingFiles: false)
    } catch {
        await cluster.stop(keepingFiles: true)
        throw error
    }
    print("conformance \(library) \(scenario): \(String(format: "%.1f", conformanceSeconds(ContinuousClock.now - start))) s in all "
          + "(server, daemon, driver)")
}

func conformanceSeconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}
