import Foundation
import IMAgentTestKit

/// Runs system commands (`ip`, `nft`, `tc`) through `/bin/sh`, each bounded
/// in time by coreutils' `timeout`, and returns their status and output.
enum Shell {
    struct Result {
        var status: Int32
        var output: String
        var succeeded: Bool { status == 0 }
    }

    /// Runs `command`; a failure is logged unless `quiet`.
    @discardableResult
    static func run(_ command: String, timeoutSeconds: Int = 20, quiet: Bool = false) -> Result {
        let output: ChildPipe
        let process: ChildProcess
        do {
            output = try ChildPipe()
            process = try ChildProcess(executable: "/usr/bin/timeout",
                                       arguments: ["-k", "2", "\(timeoutSeconds)", "/bin/sh", "-c", command],
                                       stdout: .descriptor(output.writeEnd), stderr: .descriptor(output.writeEnd))
        } catch {
            if !quiet { Log.line("shell: cannot run \(command): \(error)") }
            return Result(status: 127, output: "\(error)")
        }
        output.closeWrite()
        let text = output.readToEnd()
        process.waitUntilExit()
        let result = Result(status: process.terminationStatus, output: text)
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
