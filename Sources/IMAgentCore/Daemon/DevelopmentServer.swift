import CChildProcess
#if canImport(Glibc)
import Glibc
#endif

/// The reference server of `imagentd --dev`: `imagent-refserver` from beside
/// the running `imagentd`, a child process listening on a free loopback port.
/// It ends with the daemon: stopped at shutdown, and sent SIGTERM by the kernel
/// if the daemon dies first.
struct DevelopmentServer {
    /// `host:port` it listens on.
    let address: String
    let pid: pid_t

    /// How long the server may take to say where it listens.
    static let startLimitMilliseconds: Int32 = 10_000

    static func start(tokenFile: String, statePath: String, logPath: String) throws(DevelopmentModeError) -> DevelopmentServer {
        let program = executableDirectory() + "/imagent-refserver"
        guard access(program, X_OK) == 0 else {
            throw DevelopmentModeError("development mode runs the reference server \(program), which is missing; "
                + "build it beside imagentd (swift build --product imagent-refserver) or use scripts/dev")
        }
        let log = open(logPath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard log >= 0 else { throw DevelopmentModeError("cannot write \(logPath): \(String(cString: strerror(errno)))") }
        defer { close(log) }
        let input = open("/dev/null", O_RDONLY | O_CLOEXEC)
        defer { if input >= 0 { close(input) } }
        var output: [Int32] = [-1, -1]
        guard imagent_pipe_cloexec(&output) == 0 else {
            throw DevelopmentModeError("cannot start \(program): \(String(cString: strerror(errno)))")
        }
        defer { close(output[0]) }

        let arguments = [program, "--listen", "127.0.0.1:0", "--token-file", tokenFile, "--state", statePath]
        let argv = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let result = imagent_child_spawn(program, argv, environ, input, output[1], log, nil, SIGTERM, &pid)
        close(output[1])
        guard result == 0 else { throw DevelopmentModeError("cannot start \(program): \(String(cString: strerror(result)))") }

        // Its first line: "listening on HOST:PORT".
        let line = readLine(output[0], within: startLimitMilliseconds)
        let prefix = "listening on "
        guard let line, line.hasPrefix(prefix) else {
            let server = DevelopmentServer(address: "", pid: pid)
            server.stop()
            throw DevelopmentModeError("the reference server \(program) did not start; see \(logPath)")
        }
        return DevelopmentServer(address: String(line.dropFirst(prefix.count)), pid: pid)
    }

    /// SIGTERM (it commits its state and exits), then SIGKILL if it is still there after 5 s.
    func stop() {
        kill(pid, SIGTERM)
        for _ in 0..<500 {
            if waitpid(pid, nil, WNOHANG) != 0 { return }
            usleep(10_000)
        }
        kill(pid, SIGKILL)
        _ = waitpid(pid, nil, 0)
    }

    /// The folder of the running executable.
    private static func executableDirectory() -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard length > 0 else { return "." }
        let path = String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
    }

    /// One line from `fd`, without its newline; nil at end of input or when nothing comes for `milliseconds`.
    private static func readLine(_ fd: Int32, within milliseconds: Int32) -> String? {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        var waiting = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        while bytes.count < 4096 {
            guard poll(&waiting, 1, milliseconds) == 1, read(fd, &byte, 1) == 1 else { return nil }
            if byte == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
            bytes.append(byte)
        }
        return nil
    }
}
