import Foundation
import IMAgentTestKit
import Testing

/// The template unit imagentd@.service is as hardened as imagentd.service,
/// its instances cannot read each other's stores, and every service unit
/// stops instead of restarting on what a restart cannot fix (imagentd(8),
/// FILES and EXIT STATUS).
@Suite struct TemplateUnitTests {
    let unit = readRepositoryFile("packaging/imagentd.service")
    let template = readRepositoryFile("packaging/imagentd@.service")

    private func directives(_ text: String) -> [String] {
        text.split(separator: "\n").map(String.init).filter { !$0.hasPrefix("#") && $0.contains("=") }
    }

    @Test func theTemplateHasEveryDirectiveOfTheMainUnit_butItsOwnUserAndPaths() {
        // What differs is the instance's own: its user, files, directories and socket unit.
        let ownKeys = ["User=", "ExecStart=", "ExecReload=", "StateDirectory=", "RuntimeDirectory=", "LoadCredential=",
                       "Wants=", "After=", "Also=", "Description="]
        let templateLines = Set(directives(template))
        for line in directives(unit) where !ownKeys.contains(where: { line.hasPrefix($0) }) {
            #expect(templateLines.contains(line), "imagentd@.service lacks \(line)")
        }
    }

    @Test func eachInstanceIsAUserOfItsOwn_withAPrivateStore() {
        let lines = Set(directives(template))
        for line in ["DynamicUser=yes", "User=imagentd-%i", "Group=imagent", "StateDirectory=imagentd/%i",
                     "StateDirectoryMode=0700", "UMask=0077", "RuntimeDirectory=imagent/%i"] {
            #expect(lines.contains(line), "\(line) missing from imagentd@.service")
        }
        // The instance's socket is in its own runtime directory, where it may also bind the admin socket.
        #expect(readRepositoryFile("packaging/imagentd@.socket").contains("\nListenStream=/run/imagent/%i/imagent.sock\n"))
    }

    @Test func everyServiceUnitStopsOnUsageDamagedStoreAndConfigurationStatuses() {
        for path in ["packaging/imagentd.service", "packaging/imagentd@.service", "packaging/user/imagentd.service"] {
            #expect(directives(readRepositoryFile(path)).contains("RestartPreventExitStatus=64 65 78"), "\(path)")
        }
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze"), "needs systemd-analyze"))
    func systemdAnalyzeSecurity_ratesTheTemplateAsTheMainUnit() throws {
        let packaging = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("packaging")
        // An instance's name, as systemd-analyze rates an instance, not a template.
        let directory = try makeTemporaryDirectory(prefix: "imagentd-template")
        defer { removeTree(directory) }
        let instance = directory + "/imagentd@alice.service"
        try template.write(toFile: instance, atomically: true, encoding: .utf8)
        let main = try systemdExposure(of: packaging.appendingPathComponent("imagentd.service").path)
        let ofTemplate = try systemdExposure(of: instance)
        print("systemd-analyze security: imagentd.service \(main), imagentd@alice.service \(ofTemplate)")
        #expect(ofTemplate == main)
    }
}
