#if canImport(Glibc)
import Glibc
#endif

/// What a shell command printed (standard output and error together) and how it ended.
public struct ShellResult: Sendable {
    public var status: Int32
    public var output: String
    public var succeeded: Bool { status == 0 }
}

/// Runs `command` with `/bin/sh -c`, bounded by coreutils' `timeout` (SIGKILL two seconds
/// after `timeoutSeconds`), for system tools such as `ip`, `nft`, `tc` and `openssl`.
@discardableResult
public func runShell(_ command: String, timeoutSeconds: Int = 20) -> ShellResult {
    let output: ChildPipe
    let process: ChildProcess
    do {
        output = try ChildPipe()
        process = try ChildProcess(executable: "/usr/bin/timeout", arguments: ["-k", "2", "\(timeoutSeconds)", "/bin/sh", "-c", command],
                                   stdout: .descriptor(output.writeEnd), stderr: .descriptor(output.writeEnd))
    } catch {
        return ShellResult(status: 127, output: "cannot run \(command): \(error)")
    }
    output.closeWrite()
    let text = output.readToEnd()
    process.waitUntilExit()
    let status = process.terminationReason == .exit ? process.terminationStatus : 128 + process.terminationStatus
    return ShellResult(status: status, output: text)
}
