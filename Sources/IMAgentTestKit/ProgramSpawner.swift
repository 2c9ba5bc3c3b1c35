#if canImport(Glibc)
import Glibc
#endif

/// How a handle starts its program: `spawn(name, executable, arguments, stdout, stderr, setting)`,
/// both outputs appended to their files. The default starts a `ChildProcess` with no backtrace
/// dumps, no `$NOTIFY_SOCKET` and no `$IMAGENT_SOCKET` of this process (unless `setting` gives them);
/// a tool that must know every child (the chaos run's clean-up) passes its own.
public struct ProgramSpawner: Sendable {
    public typealias Spawn = @Sendable (_ name: String, _ executable: String, _ arguments: [String], _ stdout: String,
                                        _ stderr: String, _ setting: [String: String]) throws -> ChildProcess
    public let spawn: Spawn

    public init(_ spawn: @escaping Spawn) { self.spawn = spawn }

    public static let direct = ProgramSpawner { _, executable, arguments, stdout, stderr, setting in
        try spawn(executable, arguments, stdin: .null, stdout, stderr, setting)
    }

    /// Runs `prologue` in `/bin/sh` (a `umask`, descriptors to move), then execs the program in
    /// the shell's place, so the pid spawned (and `$$` in the prologue) is the program's own;
    /// `stdin` is the shell's standard input. Otherwise as `direct`.
    public static func throughShell(_ prologue: String, stdin: ChildProcess.Stream = .null) -> ProgramSpawner {
        ProgramSpawner { _, executable, arguments, stdout, stderr, setting in
            try spawn("/bin/sh", ["-c", prologue + "\nexec \"$0\" \"$@\"", executable] + arguments, stdin: stdin, stdout, stderr, setting)
        }
    }

    private static func spawn(_ executable: String, _ arguments: [String], stdin: ChildProcess.Stream, _ stdout: String,
                              _ stderr: String, _ setting: [String: String]) throws(ChildProcessError) -> ChildProcess {
        try ChildProcess(executable: executable, arguments: arguments,
                         setting: ["SWIFT_BACKTRACE": "enable=no"].merging(setting) { $1 },
                         unsetting: ["NOTIFY_SOCKET", "IMAGENT_SOCKET"].filter { setting[$0] == nil },
                         stdin: stdin, stdout: .file(stdout, append: true), stderr: .file(stderr, append: true))
    }

    /// `executable ARGUMENTS…`, or `ip netns exec NAMESPACE executable ARGUMENTS…` in a namespace.
    static func command(_ executable: String, _ arguments: [String], namespace: String?) -> (String, [String]) {
        guard let namespace else { return (executable, arguments) }
        return (BuiltPrograms.ip, ["netns", "exec", namespace, executable] + arguments)
    }
}

/// The last `bytes` of a file (a log), or a note that it is not there.
public func tailOfFile(_ path: String, bytes: Int = 3000) -> String {
    guard let text = readFile(path) else { return "(no \(path))" }
    return String(text.suffix(bytes))
}

/// Waits for the `listening on HOST:PORT` line a program prints first on its standard output; the port.
public func waitForListeningPort(in outPath: String, of process: ChildProcess, what: String, log: String,
                                 within limit: Duration = .seconds(30)) async throws -> Int {
    let failure = { ChildProcessError("\(what) did not start (running: \(process.isRunning)); its log:\n\(tailOfFile(log))") }
    let port = try await poll(within: limit, every: .milliseconds(10)) { () -> Int? in
        let out = readFile(outPath) ?? ""
        if let line = out.split(separator: "\n").first(where: { $0.hasPrefix("listening on ") }),
           let colon = line.lastIndex(of: ":"), let port = Int(line[line.index(after: colon)...]) {
            return port
        }
        guard process.isRunning else { throw failure() }
        return nil
    }
    if let port { return port }
    throw failure()
}

/// What the handles have in common: a started program with its log.
public protocol ProgramHandle: Sendable {
    var process: ChildProcess { get }
    /// Where its standard error (and usually its output) goes.
    var logPath: String { get }
    /// SIGTERM, then SIGKILL after `grace`; returns once it is gone.
    func stop(grace: Duration) async
}

extension ProgramHandle {
    public var pid: pid_t { process.processIdentifier }
    public var isRunning: Bool { process.isRunning }
    public var log: String { readFile(logPath) ?? "" }

    public func stop() async { await stop(grace: .seconds(5)) }

    /// SIGKILL, as a crash would; returns once it is gone.
    public func kill9() async {
        process.signal(SIGKILL)
        _ = await process.exit(within: .seconds(10))
    }

    public func signal(_ number: Int32) { process.signal(number) }

    /// Waits at most `limit` for it to exit on its own; its status, or nil if it still runs.
    public func exit(within limit: Duration) async -> Int32? { await process.exit(within: limit) }
}
