import Foundation
import IMAgentTestKit
import Testing

/// The packaged unit's sandbox (finding 10): the directives the review asked
/// for, and `systemd-analyze security`'s score, which must not get worse.
@Suite struct UnitHardeningTests {
    let unit = readRepositoryFile("packaging/imagentd.service")

    @Test func theUnitCarriesTheTrustBoundaryDirectives() {
        let lines = Set(unit.split(separator: "\n").map(String.init))
        for directive in ["UMask=0077", "StateDirectoryMode=0700", "SystemCallFilter=~@privileged @resources", "PrivateMounts=yes",
                          "MemoryMax=512M", "TasksMax=64", "SystemCallFilter=@system-service", "NoNewPrivileges=yes"] {
            #expect(lines.contains(directive), "\(directive) missing from imagentd.service")
        }
        #expect(readRepositoryFile("packaging/imagent.tmpfiles").contains("d /var/lib/imagent  0700 imagent imagent -"))
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze"), "needs systemd-analyze"))
    func systemdAnalyzeSecurity_ratesTheUnit1Point3OrBetter() throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("packaging/imagentd.service").path
        let score = try systemdExposure(of: path)
        print("systemd-analyze security: overall exposure level \(score)")
        #expect(score <= 1.3, "exposure \(score) (was 1.7 before the trust-boundaries work)")
    }
}

/// `systemd-analyze security --offline=yes`'s overall exposure level for the unit file at `path`.
func systemdExposure(of path: String) throws -> Double {
    let output = try ChildPipe()
    let process = try ChildProcess(executable: "/usr/bin/systemd-analyze", arguments: ["security", "--offline=yes", "--no-pager", path],
                                   stdout: .descriptor(output.writeEnd), stderr: .descriptor(output.writeEnd))
    output.closeWrite()
    let text = output.readToEnd()
    process.waitUntilExit()
    let line = try #require(text.split(separator: "\n").first { $0.contains("Overall exposure level") }, "\(text)")
    return try #require(line.split(separator: " ").lazy.compactMap { Double($0) }.first, "\(line)")
}
