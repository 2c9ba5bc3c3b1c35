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
        let path = BuiltPrograms.path("imagent-bench")
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
        for expected in ["codec", "daemon", "compare", "idle", "connections", "ready", "recovery", "queue", "soak", "store", "clients", "diskprobe"] {
            #expect(names.contains(expected), "the top-level help lists \(expected)")
        }
        // A run sets up in TMPDIR (stores, daemons, brokers): help must leave it empty. (Wall time
        // was the proxy here once; on a loaded 2-core CI machine a bare `--help` took 3.3 s.)
        let scratch = try makeTemporaryDirectory(prefix: "imagent-bench-help")
        defer { removeTree(scratch) }
        for name in names {
            for arguments in [[name, "--help"], [name, "--messages", "5", "--help"], [name, "-h"]] {
                let output = try await ChildProcess.run(binary, arguments, setting: ["TMPDIR": scratch], limit: .seconds(10))
                #expect(output.status == 0 && !output.signaled, "\(arguments) exited \(output.status): \(output.stdout)")
                #expect(output.stdout.hasPrefix("usage: imagent-bench \(name) "), "\(arguments) printed: \(output.stdout)")
                // Help, not a run: no benchmark table, no machine line, nothing set up.
                #expect(!output.stdout.contains("machine:") && !output.stdout.contains("|---"))
                #expect(directoryEntries(scratch).isEmpty, "\(arguments) set up \(directoryEntries(scratch))")
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

    /// `imagent-bench store` (the store's figures, once MeasurementTests in the default suite) runs, checks and prints.
    @Test("store appends and loads through the store's API and prints its figures", .timeLimit(.minutes(3)))
    func storeBenchRuns() async throws {
        let binary = try Self.binaryPath()
        let output = try await ChildProcess.run(binary, ["store", "--durability", "process", "--sizes", "64", "--load-messages", "2000"],
                                                limit: .seconds(150))
        #expect(output.status == 0 && !output.signaled, "\(output.stdout)\n\(output.stderr)")
        let lines = output.stdout.split(separator: "\n")
        for label in ["one at a time", "64 in flight", "all at once"] {
            #expect(lines.contains { $0.hasPrefix("append process 64 B, \(label): ") && $0.contains("messages/s") }, "\(output.stdout)")
        }
        #expect(lines.contains { $0.hasPrefix("load: 2,000 queued 1 KiB messages in 10 sessions loaded in ") }, "\(output.stdout)")
        let refused = try await ChildProcess.run(binary, ["store", "--durability", "disk"], limit: .seconds(10))
        #expect(refused.status == 2)
    }
}

/// The names in `path` (none for a missing folder).
private func directoryEntries(_ path: String) -> [String] {
    guard let directory = opendir(path) else { return [] }
    defer { closedir(directory) }
    var names: [String] = []
    while let entry = readdir(directory) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        if name != "." && name != ".." { names.append(name) }
    }
    return names
}
