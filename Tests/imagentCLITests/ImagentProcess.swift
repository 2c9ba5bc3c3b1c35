import Foundation

/// Runs the built `imagent` binary as a child process, the way a person or a
/// script would, and collects what it printed and its exit status.
enum ImagentProcess {
    struct Result: Sendable {
        var status: Int32
        var stdout: String
        var stderr: String

        var stdoutLines: [String] { stdout.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init) }
    }

    /// The binary sits in the build products directory, next to the test bundle.
    static let binary: URL = {
        let testExecutable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        var directory = testExecutable.deletingLastPathComponent()
        // On Linux the test executable is `<products>/imagentPackageTests.xctest`;
        // on Darwin it is inside the bundle, three levels down.
        while !FileManager.default.isExecutableFile(atPath: directory.appendingPathComponent("imagent").path),
              directory.pathComponents.count > 1 {
            directory.deleteLastPathComponent()
        }
        return directory.appendingPathComponent("imagent")
    }()

    /// Runs `imagent ARGUMENTS…` with `stdin` as its standard input (nothing,
    /// /dev/null, when nil) and the environment given (IMAGENT_SOCKET removed
    /// unless set there), killing it after `limit`. `executable` replaces
    /// `imagent` for a wrapper that runs it (such as setpriv(1) for another uid).
    static func run(_ arguments: [String], stdin: String? = nil, environment: [String: String] = [:],
                    limit: Duration = .seconds(20), executable: URL = binary) async throws -> Result {
        let directory = try FakeDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let outPath = directory + "/stdout", errPath = directory + "/stderr", inPath = directory + "/stdin"
        _ = FileManager.default.createFile(atPath: outPath, contents: nil)
        _ = FileManager.default.createFile(atPath: errPath, contents: nil)
        _ = FileManager.default.createFile(atPath: inPath, contents: Data((stdin ?? "").utf8))

        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        var childEnvironment = ProcessInfo.processInfo.environment
        childEnvironment["IMAGENT_SOCKET"] = nil
        childEnvironment.merge(environment) { $1 }
        process.environment = childEnvironment
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
        process.standardInput = try FileHandle(forReadingFrom: URL(fileURLWithPath: inPath))

        let status: Int32 = try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { finished in continuation.resume(returning: finished.terminationStatus) }
            do {
                try process.run()
            } catch {
                process.terminationHandler = nil
                continuation.resume(throwing: error)
                return
            }
            // A hung child must fail the test, not hang the suite.
            let deadline = DispatchTime.now() + .milliseconds(Int(limit.components.seconds * 1000))
            DispatchQueue.global().asyncAfter(deadline: deadline) { [process] in
                if process.isRunning { process.terminate() }
            }
        }
        return Result(status: status,
                      stdout: (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? "",
                      stderr: (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "")
    }

    /// `run` with `--socket` pointing at `daemon`, before the subcommand.
    static func run(_ arguments: [String], against daemon: FakeDaemon, stdin: String? = nil) async throws -> Result {
        try await run(["--socket", daemon.socketPath] + arguments, stdin: stdin)
    }
}
