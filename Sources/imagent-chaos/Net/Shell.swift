import Foundation
import IMAgentTestKit

/// System commands (`ip`, `nft`, `tc`) through the kit's `runShell`, failures logged.
enum Shell {
    typealias Result = ShellResult

    /// Runs `command`; a failure is logged unless `quiet`.
    @discardableResult
    static func run(_ command: String, timeoutSeconds: Int = 20, quiet: Bool = false) -> Result {
        let result = runShell(command, timeoutSeconds: timeoutSeconds)
        if !result.succeeded, !quiet {
            Log.line("shell: exit \(result.status): \(command)\n\(result.output.trimmingCharacters(in: .whitespacesAndNewlines))")
        }
        return result
    }
}

/// Progress lines on stderr, with the time since the run began.
enum Log {
    private static let start = Date()

    static func line(_ text: String) {
        let seconds = String(format: "%7.2f", Date().timeIntervalSince(start))
        FileHandle.standardError.write(Data("[chaos \(seconds)s] \(text)\n".utf8))
    }
}

/// Milliseconds since the Unix epoch: the daemon reports `connected_since_ms` on the same clock.
func wallMS() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec / 1_000_000)
}

struct ChaosError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
