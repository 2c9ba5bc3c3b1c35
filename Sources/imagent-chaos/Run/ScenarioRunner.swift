import ArgumentParser
import Foundation
import IMAgentTestKit

/// What a finished scenario reports: a readable text for stderr, one JSON line for stdout, a verdict.
protocol ScenarioReport {
    var text: String { get }
    var json: String { get }
    var passed: Bool { get }
}

extension ChaosReport: ScenarioReport {}
extension PartitionRun.Report: ScenarioReport {}

/// The part every `imagent-chaos` scenario subcommand shares: skip where namespaces
/// cannot work, refuse when a program is not built, bound the whole run in time,
/// clean up on every path, print the report and exit 1 unless it passed.
enum ScenarioRunner {
    /// `name` is how the SKIPPED line names the command; `timeLimitSeconds` is computed
    /// once the run may go ahead; `scenario` runs it.
    static func run(_ name: String, timeLimitSeconds: () -> Double,
                    _ scenario: () async throws -> any ScenarioReport) async throws {
        if let reason = Topology.unavailableReason() {
            print("\(name): SKIPPED: \(reason)")
            return
        }
        let missing = Binaries.missing()
        guard missing.isEmpty else {
            throw ChaosError("not built: \(missing.joined(separator: ", ")) (swift build --product imagentd, … one product per command)")
        }
        Children.shared.installTraps(timeLimitSeconds: timeLimitSeconds())
        let report: any ScenarioReport
        do {
            report = try await scenario()
        } catch {
            Log.line("run failed: \(error)")
            Children.shared.cleanUp()
            throw ExitCode(1)
        }
        Children.shared.cleanUp()
        FileHandle.standardError.write(Data((report.text + "\n").utf8))
        print(report.json)
        fflush(nil)
        if !report.passed { throw ExitCode(1) }
    }
}
