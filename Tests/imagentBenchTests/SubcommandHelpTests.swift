#if canImport(Glibc)
import Glibc
#endif
import IMAgentTestKit
import Testing

/// `imagent-bench SUBCOMMAND --help` prints help and runs nothing (issue 10).
@Suite("imagent-bench's help")
struct SubcommandHelpTests {
    /// The binary sits next to the test bundle in the build products directory.
    static func binaryPath() throws -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        try #require(length > 0)
        let exe = String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let path = String(exe[..<(exe.lastIndex(of: "/") ?? exe.startIndex)]) + "/imagent-bench"
        try #require(access(path, X_OK) == 0, "the imagent-bench binary at \(path) (build it with `swift build`)")
        return path
    }

    /// The subcommands the top-level help lists, one `usage: imagent-bench NAME` line each.
    static func subcommands(_ binary: String) async throws -> [String] {
        let output = try await ChildProcess.run(binary, ["--help"], limit: .seconds(10))
        #expect(output.status == 0 && !output.signaled)
        return output.stdout.split(separator: "\n").compactMap { line in
            line.hasPrefix("usage: imagent-bench ") ? line.dropFirst("usage: imagent-bench ".count).split(separator: " ").first.map(String.init) : nil
        }
    }

    @Test("every subcommand's --help prints its usage and exits 0 at once, without benchmarking", .timeLimit(.minutes(2)))
    func everySubcommandHelp() async throws {
        let binary = try Self.binaryPath()
        let names = try await Self.subcommands(binary)
        // The ones there are today; new ones are covered as the top-level help lists them.
        for expected in ["codec", "daemon", "compare", "idle", "connections", "ready", "recovery", "queue", "soak"] {
            #expect(names.contains(expected), "the top-level help lists \(expected)")
        }
        for name in names {
            for arguments in [[name, "--help"], [name, "--messages", "5", "--help"], [name, "-h"]] {
                let start = ContinuousClock.now
                let output = try await ChildProcess.run(binary, arguments, limit: .seconds(10))
                let elapsed = ContinuousClock.now - start
                #expect(output.status == 0 && !output.signaled, "\(arguments) exited \(output.status): \(output.stdout)")
                #expect(output.stdout.hasPrefix("usage: imagent-bench \(name) "), "\(arguments) printed: \(output.stdout)")
                // Help, not a run: no benchmark table, no machine line, well under the second a run's set-up takes.
                #expect(!output.stdout.contains("machine:") && !output.stdout.contains("|---"))
                #expect(elapsed < .seconds(3), "\(arguments) took \(elapsed)")
            }
        }
    }

    @Test("an option a subcommand does not know is refused with its usage, exit 2", .timeLimit(.minutes(1)))
    func unknownOptionRefused() async throws {
        let binary = try Self.binaryPath()
        let output = try await ChildProcess.run(binary, ["queue", "--byts", "64MiB"], limit: .seconds(10))
        #expect(output.status == 2)
        #expect(output.stdout.contains("unknown option --byts"))
        #expect(output.stdout.contains("usage: imagent-bench queue "))
        let missing = try await ChildProcess.run(binary, ["daemon", "--messages"], limit: .seconds(10))
        #expect(missing.status == 2)
        #expect(missing.stdout.contains("--messages needs a value"))
    }
}
