#if canImport(Glibc)
import Glibc
#endif
import IMAgentTestKit
import RefServer

struct ClientsBenchOptions: Sendable {
    /// Messages of the one-way phase; the round trips are a tenth of them (at least 100).
    var messages = 10_000
    var sizes = [64, 1024]
    var libraries = ClientLibrary.allCases
    var durability = "process"
    var timeLimitSeconds = 900
}

/// A client library, measured through its conformance driver
/// (clients/conformance/README.md) in the driver's `bench` scenario.
enum ClientLibrary: String, CaseIterable, Sendable {
    case swift, c, python

    var label: String {
        switch self {
        case .swift: "Swift IPCClient"
        case .c: "libimagent (C)"
        case .python: "imagent (Python)"
        }
    }

    /// The checkout this binary was built from: the C and Python drivers are run from there.
    static let checkout: String = {
        var parts = "\(#filePath)".split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        parts.removeLast(3)  // Sources/imagent-bench/ClientsBench.swift
        return parts.joined(separator: "/")
    }()

    /// The program to run, the arguments before the contract's, and its environment.
    var driver: (program: String, arguments: [String], environment: [String: String]) {
        switch self {
        case .swift:
            (BuiltPrograms.path("imagent-conformance"), [], [:])
        case .c:
            (Self.checkout + "/clients/c/build/imagent-conformance-c", [], [:])
        case .python:
            ("/usr/bin/python3", [Self.checkout + "/clients/python/tests/conformance_driver.py"],
             ["PYTHONPATH": Self.checkout + "/clients/python/src", "PYTHONDONTWRITEBYTECODE": "1"])
        }
    }

    /// The file that must exist for the driver to run.
    var driverFile: String { driver.arguments.first ?? driver.program }
}

/// What a driver's `bench` report says.
struct ClientBenchReport: Equatable, Sendable {
    var onewayPerSecond: Double
    var rttP50Microseconds: Double
    var rttP99Microseconds: Double

    init(onewayPerSecond: Double, rttP50Microseconds: Double, rttP99Microseconds: Double) {
        (self.onewayPerSecond, self.rttP50Microseconds, self.rttP99Microseconds) = (onewayPerSecond, rttP50Microseconds, rttP99Microseconds)
    }

    /// From the driver's last line, `{"scenario":"bench","size":B,"oneway_msgs_per_s":X,"rtt_p50_us":Y,"rtt_p99_us":Z}`;
    /// nil when it is not such a report.
    init?(reportLine line: some StringProtocol) {
        guard jsonValue("scenario", in: line) == "\"bench\"", let oneway = jsonValue("oneway_msgs_per_s", in: line).flatMap(Double.init),
              let p50 = jsonValue("rtt_p50_us", in: line).flatMap(Double.init), let p99 = jsonValue("rtt_p99_us", in: line).flatMap(Double.init)
        else { return nil }
        (onewayPerSecond, rttP50Microseconds, rttP99Microseconds) = (oneway, p50, p99)
    }
}

/// The value of `key` in one line of flat JSON, as written (a string with its quotes), whatever the
/// spacing (Python's json.dumps puts a space after `:` and `,`); the bench report nests nothing.
func jsonValue(_ key: String, in text: some StringProtocol) -> Substring? {
    let line = Substring(text)
    guard let range = line.firstRange(of: "\"\(key)\"") else { return nil }
    let afterKey = line[range.upperBound...].drop { $0 == " " }
    guard afterKey.first == ":" else { return nil }
    let value = afterKey.dropFirst().drop { $0 == " " }.prefix { $0 != "," && $0 != "}" }
    return value.isEmpty ? nil : value
}

/// `imagent-bench clients`: the release `imagentd` against an in-process
/// reference server, and each client library's conformance driver in turn,
/// in its `bench` scenario, at each size: one table of one-way msg/s and
/// round-trip p50/p99 per library and size.
func runClientsBench(_ options: ClientsBenchOptions) async -> Int32 {
    startWatchdog(seconds: options.timeLimitSeconds)
    let server: RefServer
    let serverDirectory: String
    do {
        (server, serverDirectory) = try await startReferenceServer()
    } catch {
        print("imagent-bench clients: cannot start the reference server: \(error)")
        return 1
    }
    defer { removeDirectory(serverDirectory) }
    let daemon: DaemonProcess
    do {
        daemon = try await DaemonProcess(serverAddress: server.address, token: benchToken, durability: options.durability, maxSessions: 1_000)
        temporaryDirectories.append(daemon.directory)
    } catch {
        print("imagent-bench clients: cannot start imagentd: \(error)")
        return 1
    }
    do {
        try await waitForLink(daemon)
    } catch {
        print("imagent-bench clients: \(error); imagentd's log:\n\(String(daemon.log.suffix(2000)))")
        await daemon.stop()
        return 1
    }
    print("machine: \(sysconf(Int32(_SC_NPROCESSORS_ONLN))) cores, load average \(loadAverage()) at start")
    print("imagentd (durability \(options.durability)) and the reference server; each library's conformance driver, scenario bench: "
          + "\(grouped(options.messages)) sends to sink one at a time (each returns at ACCEPTED), then "
          + "\(grouped(max(options.messages / 10, 100))) sequential round trips on echo")
    print("")
    print("| library | size | one-way msg/s | round trip p50 ms | p99 ms |")
    print("|---|---:|---:|---:|---:|")
    var problems: [String] = []
    var table = MarkdownTable([.text("library"), .number("size"), .number("one-way msg/s"), .number("vs Swift"),
                               .number("round trip p50 ms"), .number("p99 ms")])
    var swiftRates: [Int: Double] = [:]
    for library in options.libraries {
        for size in options.sizes {
            let row = "| \(library.label) | \(bytesLabel(size)) |"
            do {
                let report = try await runDriver(library, socketPath: daemon.socketPath, size: size, messages: options.messages,
                                                 limitSeconds: options.timeLimitSeconds)
                print("\(row) \(grouped(Int(report.onewayPerSecond.rounded()))) | \(format(report.rttP50Microseconds / 1000, decimals: 3)) | "
                      + "\(format(report.rttP99Microseconds / 1000, decimals: 3)) |")
                if library == .swift { swiftRates[size] = report.onewayPerSecond }
                table.add([library.label, bytesLabel(size), grouped(Int(report.onewayPerSecond.rounded())),
                           swiftRates[size].map { ratioLabel(report.onewayPerSecond / $0) } ?? "",
                           format(report.rttP50Microseconds / 1000, decimals: 3), format(report.rttP99Microseconds / 1000, decimals: 3)])
            } catch {
                print("\(row) FAILED | | |")
                problems.append("\(library.label), \(bytesLabel(size)): \(error)")
            }
        }
    }
    print("load average \(loadAverage()) at the end")
    for problem in problems { print("imagent-bench clients: \(problem)") }
    await printMarkdown(table)
    await daemon.stop()
    try? await server.stop()
    return problems.isEmpty ? 0 : 1
}

/// Runs one driver's `bench` scenario to its end and reads its report.
private func runDriver(_ library: ClientLibrary, socketPath: String, size: Int, messages: Int, limitSeconds: Int) async throws -> ClientBenchReport {
    let driver = library.driver
    guard access(library.driverFile, R_OK) == 0 else {
        throw BenchError("no driver at \(library.driverFile) (scripts/bench clients builds them)")
    }
    let arguments = driver.arguments + ["--socket", socketPath, "bench", "--messages", String(messages), "--size", String(size),
                                        "--timeout-ms", String(limitSeconds * 1000)]
    let output = try await ChildProcess.run(driver.program, arguments, setting: driver.environment, limit: .seconds(limitSeconds))
    let last = output.stdout.split(separator: "\n").last ?? ""
    guard output.status == 0, !output.signaled, let report = ClientBenchReport(reportLine: last) else {
        throw BenchError("the driver \(output.signaled ? "was killed by signal" : "exited") \(output.status); "
                         + "its last line: \(last); stderr: \(String(output.stderr.suffix(500)))")
    }
    return report
}
