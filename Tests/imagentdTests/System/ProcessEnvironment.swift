import Glibc
import Testing

/// Parent of every suite that changes the process environment (NOTIFY_SOCKET,
/// WATCHDOG_*, LISTEN_*, JOURNAL_STREAM, CREDENTIALS_DIRECTORY): setenv and
/// getenv on different threads race in glibc, and the variables are
/// process-wide, so these run one at a time — and in a `swift test` run of
/// their own (`scripts/test` skips them in the main run): a setenv while
/// another test's Foundation `Process.run()` copies the environment crashed
/// the whole test process once.
@Suite(.serialized) struct ProcessEnvironment {}

/// Sets `variables` (nil: unsets) for the duration of `body`, then restores them.
func withEnvironment<T>(_ variables: [String: String?], _ body: () throws -> T) rethrows -> T {
    var saved: [String: String?] = [:]
    for (name, value) in variables {
        saved[name] = getenv(name).map { String(cString: $0) }
        if let value { setenv(name, value, 1) } else { unsetenv(name) }
    }
    defer {
        for (name, value) in saved {
            if let value { setenv(name, value, 1) } else { unsetenv(name) }
        }
    }
    return try body()
}

/// A fresh private directory under /tmp, removed by `removeTemporaryDirectory`.
func makeTemporaryDirectory() -> String {
    var template = Array("/tmp/imagent-test-XXXXXX".utf8CString)
    let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    precondition(made != nil, "mkdtemp failed: \(errno)")
    return template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
}

/// Fills a `sockaddr_un` for `path` and calls `body` with it.
func withUnixAddress<T>(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    precondition(bytes.count < MemoryLayout.size(ofValue: address.sun_path), "socket path too long: \(path)")
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        raw.copyBytes(from: bytes)
        raw[bytes.count] = 0
    }
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
}

/// A Unix socket of `type` bound to `path`; listening when `listen` is set.
func makeUnixSocket(type: Int32, path: String, listen shouldListen: Bool) -> Int32 {
    let fd = socket(AF_UNIX, type | Int32(SOCK_CLOEXEC.rawValue), 0)
    precondition(fd >= 0, "socket failed: \(errno)")
    let bound = withUnixAddress(path) { bind(fd, $0, $1) }
    precondition(bound == 0, "bind \(path) failed: \(errno)")
    if shouldListen {
        precondition(listen(fd, 8) == 0, "listen failed: \(errno)")
    }
    return fd
}
