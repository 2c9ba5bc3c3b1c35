import Glibc
import Testing

/// Parent of every suite that changes the process environment (NOTIFY_SOCKET,
/// WATCHDOG_*, LISTEN_*, JOURNAL_STREAM, CREDENTIALS_DIRECTORY): setenv and
/// getenv on different threads race in glibc, and the variables are
/// process-wide, so these run one at a time — and in a `swift test` run of
/// their own (`scripts/test` skips them in the main run): a setenv while
/// another test starts a child (`ChildProcess` copies `environ`, as Foundation's
/// `Process.run()` did when it crashed the whole test process once) races it.
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
