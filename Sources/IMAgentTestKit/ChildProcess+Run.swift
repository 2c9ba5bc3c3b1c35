#if canImport(Glibc)
import Glibc
#endif

extension ChildProcess {
    /// What a finished command printed, and how it ended.
    public struct Output: Sendable {
        /// The exit code, or the signal that ended it (see `signaled`).
        public var status: Int32
        public var signaled: Bool
        public var stdout: String
        public var stderr: String
    }

    /// Runs `executable ARGUMENTS…` to its end with `stdin` as its standard input (nil:
    /// /dev/null) and collects what it printed; after `limit` it is killed (SIGKILL), and its
    /// output so far is returned with `signaled` set.
    public static func run(_ executable: String, _ arguments: [String] = [], stdin: String? = nil,
                           environment: [String: String]? = nil, setting: [String: String] = [:], unsetting: [String] = [],
                           limit: Duration = .seconds(60)) async throws -> Output {
        let directory = try makeTemporaryDirectory(prefix: "imagent-run")
        defer { removeTree(directory) }
        let (inPath, outPath, errPath) = (directory + "/stdin", directory + "/stdout", directory + "/stderr")
        try writeFile(inPath, stdin ?? "")
        let child = try ChildProcess(executable: executable, arguments: arguments, environment: environment,
                                     setting: setting, unsetting: unsetting, stdin: stdin == nil ? .null : .file(inPath),
                                     stdout: .file(outPath), stderr: .file(errPath))
        if await child.exit(within: limit) == nil {
            child.signal(SIGKILL)
            _ = await child.exit(within: .seconds(10))
        }
        return Output(status: child.terminationStatus, signaled: child.terminationReason == .uncaughtSignal,
                      stdout: readFile(outPath) ?? "", stderr: readFile(errPath) ?? "")
    }
}

/// A new private directory under $TMPDIR (or /tmp): `PREFIX.XXXXXX`.
public func makeTemporaryDirectory(prefix: String) throws(ChildProcessError) -> String {
    let base = getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
    var template = Array("\(base)/\(prefix).XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else {
        throw ChildProcessError("cannot create a temporary directory in \(base): \(ChildProcess.errorText(errno))")
    }
    return String(cString: made)
}

/// The names in a directory, without `.` and `..`; none when it cannot be read.
public func listDirectory(_ path: String) -> [String] {
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

/// Removes `path` and everything below it; quiet when it is not there.
public func removeTree(_ path: String) {
    guard let directory = opendir(path) else {
        unlink(path)
        return
    }
    while let entry = readdir(directory) {
        let name = withUnsafePointer(to: &entry.pointee.d_name) {
            String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self))
        }
        guard name != ".", name != ".." else { continue }
        let child = path + "/" + name
        if entry.pointee.d_type == DT_DIR { removeTree(child) } else { unlink(child) }
    }
    closedir(directory)
    rmdir(path)
}

public func writeFile(_ path: String, _ text: String) throws(ChildProcessError) {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard fd >= 0 else { throw ChildProcessError("cannot write \(path): \(ChildProcess.errorText(errno))") }
    defer { close(fd) }
    var bytes = Array(text.utf8)[...]
    while !bytes.isEmpty {
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        if written < 0, errno == EINTR { continue }
        guard written > 0 else { throw ChildProcessError("cannot write \(path): \(ChildProcess.errorText(errno))") }
        bytes = bytes.dropFirst(written)
    }
}

public func readFile(_ path: String) -> String? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65_536)
    while true {
        let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if count < 0, errno == EINTR { continue }
        guard count > 0 else { break }
        bytes += chunk[..<count]
    }
    return String(decoding: bytes, as: UTF8.self)
}
