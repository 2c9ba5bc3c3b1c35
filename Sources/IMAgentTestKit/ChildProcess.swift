import CChildProcess
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// A child process for tests and test tools, started without Foundation's
/// `Process` (whose `run()` in this toolchain lists `/proc/self/fd` and
/// overruns a buffer when the parent holds thousands of descriptors).
///
/// The child dies with its parent (`PR_SET_PDEATHSIG`, SIGKILL by default),
/// so a crashed test run leaves no daemon behind. The names of the members
/// follow Foundation's `Process`, which this replaces.
public final class ChildProcess: Sendable {
    /// Where one of the child's standard descriptors comes from or goes.
    public enum Stream: Sendable {
        /// The parent's own descriptor.
        case inherit
        /// `/dev/null`.
        case null
        /// A file: read from, or written to (truncated, or appended to with `append`).
        case file(String, append: Bool = false)
        /// A descriptor of the parent's (such as one end of a pipe); the parent keeps its copy.
        case descriptor(Int32)
    }

    public enum TerminationReason: Sendable { case exit, uncaughtSignal }

    public let processIdentifier: pid_t
    /// The raw `waitpid` status once reaped.
    private let reaped = Mutex<Int32?>(nil)

    /// Starts `executable` (a path) with `arguments`. `environment` nil passes this process's own;
    /// `setting` adds or replaces variables in it and `unsetting` removes some, either way.
    public init(executable: String, arguments: [String] = [], environment: [String: String]? = nil,
                setting: [String: String] = [:], unsetting: [String] = [], stdin: Stream = .null, stdout: Stream = .inherit, stderr: Stream = .inherit,
                directory: String? = nil, deathSignal: Int32 = SIGKILL) throws(ChildProcessError) {
        var variables = environment ?? ChildProcess.currentEnvironment()
        variables.merge(setting) { $1 }
        for name in unsetting { variables[name] = nil }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = variables.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + envp).forEach { free($0) } }

        var opened: [Int32] = []
        defer { opened.forEach { close($0) } }
        func descriptor(_ stream: Stream, forWriting: Bool) throws(ChildProcessError) -> Int32 {
            let (path, flags): (String, Int32)
            switch stream {
            case .inherit: return -1
            case .descriptor(let fd): return fd
            case .null: (path, flags) = ("/dev/null", forWriting ? O_WRONLY : O_RDONLY)
            case .file(let file, let append):
                (path, flags) = (file, forWriting ? O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC) : O_RDONLY)
            }
            let fd = open(path, flags | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw ChildProcessError("cannot open \(path) for \(executable): \(ChildProcess.errorText(errno))") }
            opened.append(fd)
            return fd
        }
        let input = try descriptor(stdin, forWriting: false)
        let output = try descriptor(stdout, forWriting: true)
        // The same file for both streams: one descriptor, so their writes interleave in order.
        let error: Int32
        if case .file(let a, _) = stdout, case .file(let b, _) = stderr, a == b { error = output } else {
            error = try descriptor(stderr, forWriting: true)
        }
        var pid: pid_t = 0
        let result = imagent_child_spawn(executable, argv, envp, input, output, error, directory, deathSignal, &pid)
        guard result == 0 else { throw ChildProcessError("cannot start \(executable): \(ChildProcess.errorText(result))") }
        processIdentifier = pid
    }

    deinit {
        // Reap a child nobody waited for, if it is gone: no zombie for the test process's lifetime.
        _ = isRunning
    }

    /// Whether the child has not exited yet (it is reaped once it has).
    public var isRunning: Bool { reap(blocking: false) == nil }

    /// Its exit code, or the signal that ended it (see `terminationReason`); 0 while it runs.
    public var terminationStatus: Int32 {
        guard let status = reaped.withLock({ $0 }) else { return 0 }
        return status & 0x7F == 0 ? (status >> 8) & 0xFF : status & 0x7F
    }

    public var terminationReason: TerminationReason {
        guard let status = reaped.withLock({ $0 }) else { return .exit }
        return status & 0x7F == 0 ? .exit : .uncaughtSignal
    }

    /// SIGTERM.
    public func terminate() { signal(SIGTERM) }

    public func signal(_ number: Int32) {
        if isRunning { kill(processIdentifier, number) }
    }

    /// Blocks the calling thread until the child exits: only for children sure to end soon.
    public func waitUntilExit() { _ = reap(blocking: true) }

    /// Waits, polling, at most `limit` for the child to exit; its status, or nil if it still runs.
    public func exit(within limit: Duration) async -> Int32? {
        let deadline = ContinuousClock.now + limit
        while isRunning, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(10)) }
        return isRunning ? nil : terminationStatus
    }

    /// SIGTERM, then SIGKILL if it is still there after `grace`; waits until it is gone.
    public func stop(grace: Duration = .seconds(5)) async {
        terminate()
        if await exit(within: grace) == nil {
            signal(SIGKILL)
            _ = await exit(within: .seconds(10))
        }
    }

    private func reap(blocking: Bool) -> Int32? {
        reaped.withLock { reaped in
            if let status = reaped { return status }
            var status: Int32 = 0
            while true {
                let result = waitpid(processIdentifier, &status, blocking ? 0 : WNOHANG)
                if result == processIdentifier { reaped = status; return status }
                if result == 0 { return nil }
                if errno == EINTR { continue }
                // ECHILD: someone else reaped it; it is gone all the same.
                reaped = 0
                return 0
            }
        }
    }

    /// This process's environment as a dictionary.
    public static func currentEnvironment() -> [String: String] {
        var variables: [String: String] = [:]
        var entry = environ
        while let variable = entry.pointee {
            let text = String(cString: variable)
            if let equals = text.firstIndex(of: "=") {
                variables[String(text[..<equals])] = String(text[text.index(after: equals)...])
            }
            entry += 1
        }
        return variables
    }

    static func errorText(_ code: Int32) -> String { String(cString: strerror(code)) }
}

public struct ChildProcessError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
