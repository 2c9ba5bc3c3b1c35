#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Where the LOGIN token comes from (`[auth]` in the config). Reading is
/// blocking work: the engine runs `TokenSource.read(deadline:)` on its thread
/// pool, never on the event loop, and caches the result until the server
/// says TOKEN_INVALID or TOKEN_EXPIRED.
enum TokenSource: Hashable, Sendable, CustomStringConvertible {
    /// A file whose contents (surrounding blanks and newlines dropped) are the token.
    case file(String)
    /// A command (argv, looked up in PATH) whose standard output is the token.
    case command([String])
    /// A systemd credential: `$CREDENTIALS_DIRECTORY/NAME` (`LoadCredential=`).
    case credential(String)
    /// No token: an MQTT upstream without `[auth]` (CONNECT carries no password).
    case absent

    var description: String {
        switch self {
        case .file(let path): "token file \(path)"
        case .command(let argv): "token command \(argv.first ?? "")"
        case .credential(let name): "credential \(name)"
        case .absent: "no token"
        }
    }

    /// A token longer than this is a misconfiguration (a wrong file), not a token.
    static let maxSize = 64 * 1024

    /// Reads the token; blocks for at most about `timeout`.
    func read(timeout: Duration) throws(TokenError) -> [UInt8] {
        let raw: [UInt8]
        switch self {
        case .file(let path):
            raw = try Self.readFile(path)
        case .credential(let name):
            guard let directory = getenv("CREDENTIALS_DIRECTORY").map({ String(cString: $0) }), !directory.isEmpty else {
                throw TokenError("credential \(name): CREDENTIALS_DIRECTORY is not set (no LoadCredential= in the unit?)")
            }
            guard !name.contains("/") else { throw TokenError("credential name \(name) must not contain /") }
            raw = try Self.readFile(directory + "/" + name)
        case .command(let argv):
            raw = try Self.run(argv, timeout: timeout)
        case .absent:
            return []
        }
        let token = Self.trimmed(raw)
        guard !token.isEmpty else { throw TokenError("\(self) gave an empty token") }
        return token
    }

    private static func trimmed(_ bytes: [UInt8]) -> [UInt8] {
        let blank: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }
        guard let first = bytes.firstIndex(where: { !blank($0) }), let last = bytes.lastIndex(where: { !blank($0) }) else {
            return []
        }
        return Array(bytes[first...last])
    }

    private static func readFile(_ path: String) throws(TokenError) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw TokenError("cannot open \(path): \(errnoText())") }
        defer { close(fd) }
        var contents: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw TokenError("cannot read \(path): \(errnoText())")
            }
            if count == 0 { return contents }
            contents.append(contentsOf: chunk[0..<count])
            guard contents.count <= maxSize else { throw TokenError("\(path) is larger than \(maxSize) bytes") }
        }
    }

    /// Runs `argv` with stdout on a pipe (stdin from /dev/null, stderr
    /// inherited so its complaints reach the journal), reads until EOF, and
    /// kills it when `timeout` passes first.
    private static func run(_ argv: [String], timeout: Duration) throws(TokenError) -> [UInt8] {
        guard let program = argv.first, !program.isEmpty else { throw TokenError("token command is empty") }
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw TokenError("pipe: \(errnoText())") }
        // Close-on-exec, so other children never hold the write end open;
        // the child's dup2 onto stdout clears the flag on its copy.
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, fds[1], 1)

        let cArgs: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
        defer { for arg in cArgs { free(arg) } }
        // Its own process group: on timeout the whole group goes, helpers it started included.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP))
        posix_spawnattr_setpgroup(&attributes, 0)
        var pid: pid_t = 0
        let spawned = posix_spawnp(&pid, program, &actions, &attributes, cArgs, environ)
        close(fds[1])
        guard spawned == 0 else {
            close(fds[0])
            throw TokenError("cannot run \(program): \(String(cString: strerror(spawned)))")
        }
        defer { close(fds[0]) }

        let deadline = monotonicNanoseconds() + UInt64(max(0, timeout.wholeNanoseconds))
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        var failure: TokenError?
        reading: while true {
            let now = monotonicNanoseconds()
            guard now < deadline else {
                failure = TokenError("\(program) gave no token within \(timeout)")
                break
            }
            var poller = pollfd(fd: fds[0], events: Int16(POLLIN), revents: 0)
            let waitMS = Int32(min(UInt64(Int32.max), (deadline - now) / 1_000_000 + 1))
            let ready = poll(&poller, 1, waitMS)
            if ready < 0 {
                if errno == EINTR { continue }
                failure = TokenError("poll: \(errnoText())")
                break
            }
            if ready == 0 { continue }
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fds[0], $0.baseAddress, $0.count) }
            switch count {
            case ..<0 where errno == EINTR:
                continue
            case ..<0:
                failure = TokenError("reading from \(program): \(errnoText())")
                break reading
            case 0:
                break reading
            default:
                output.append(contentsOf: chunk[0..<count])
                if output.count > maxSize {
                    failure = TokenError("\(program) wrote more than \(maxSize) bytes")
                    break reading
                }
            }
        }
        if failure != nil { kill(-pid, SIGKILL) }
        // The output ended, but the command may still not exit: the wait is bounded too.
        var status: Int32 = 0
        switch Self.wait(for: pid, until: max(deadline, monotonicNanoseconds()) + Self.exitGrace, status: &status) {
        case .exited:
            break
        case .running:
            kill(-pid, SIGKILL)
            if Self.wait(for: pid, until: monotonicNanoseconds() + Self.exitGrace, status: &status) == .running {
                throw failure ?? TokenError("\(program) did not exit, even after SIGKILL to its process group")
            }
            if failure == nil { failure = TokenError("\(program) printed its output but did not exit within \(timeout)") }
        }
        if let failure { throw failure }
        // WIFEXITED / WEXITSTATUS, spelled out: Glibc's macros are not imported.
        let exited = (status & 0x7F) == 0
        let exitCode = (status >> 8) & 0xFF
        guard exited && exitCode == 0 else {
            throw TokenError("\(program) failed (\(exited ? "exit \(exitCode)" : "signal \(status & 0x7F)"))")
        }
        return output
    }
}

extension TokenSource {
    /// How long an exit is waited for after the output ended or the group was killed.
    static let exitGrace: UInt64 = 1_000_000_000

    private enum ChildState { case exited, running }

    /// `waitpid` polled until `deadline` (monotonic ns), never blocking past it.
    private static func wait(for pid: pid_t, until deadline: UInt64, status: inout Int32) -> ChildState {
        while true {
            let result = waitpid(pid, &status, WNOHANG)
            if result == pid || (result < 0 && errno != EINTR) { return .exited }
            if monotonicNanoseconds() >= deadline { return .running }
            usleep(5_000)
        }
    }

    /// A warning when a token file can be read by other users than its owner.
    static func permissionWarning(_ path: String) -> String? {
        var status = stat()
        guard stat(path, &status) == 0, status.st_mode & 0o077 != 0 else { return nil }
        return "the token file \(path) is mode \(String(status.st_mode & 0o777, radix: 8)): other users can read the token; chmod 0600 it"
    }
}

struct TokenError: Error, Hashable, Sendable, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

func errnoText(_ code: Int32 = errno) -> String {
    String(cString: strerror(code))
}
