import ArgumentParser
import Foundation
import Testing

@testable import imagent_cli

/// imagent(1) and the CLI agree: every command the page documents exists,
/// and every command that exists is documented.
@Suite struct ManPageCommandTests {
    static let page = "man/imagent.1"

    /// The command names of the page's COMMANDS section: the first word of the
    /// line after each `.TP` (`.B status`, `\fBwait\-online\fR [...]`, `.BI close " SESSION"`).
    static func documentedCommands(_ text: String) -> Set<String> {
        var names: Set<String> = []
        var inSection = false
        var afterTP = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if line.hasPrefix(".SH ") {
                inSection = line == ".SH COMMANDS"
                continue
            }
            guard inSection else { continue }
            if line == ".TP" || line == ".TQ" {
                afterTP = true
                continue
            }
            if afterTP {
                var plain = line.replacingOccurrences(of: "\\-", with: "-")
                for font in ["\\fB", "\\fR", "\\fI"] { plain = plain.replacingOccurrences(of: font, with: " ") }
                plain = plain.replacingOccurrences(of: "\"", with: " ")
                let words = plain.split(separator: " ").map(String.init).filter { !$0.hasPrefix(".") }
                if let name = words.first { names.insert(name) }
            }
            afterTP = false
        }
        return names
    }

    static var commands: Set<String> {
        let configuration = Imagent.configuration
        let all = configuration.subcommands + configuration.groupedSubcommands.flatMap(\.subcommands)
        return Set(all.compactMap { $0.configuration.commandName })
    }

    @Test func everyDocumentedCommandExists_andEveryCommandIsDocumented() throws {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent(Self.page)
        let documented = Self.documentedCommands(try String(contentsOf: url, encoding: .utf8))
        #expect(documented.count >= 15, "the parser found too few commands in \(Self.page): \(documented.sorted())")
        for name in documented.subtracting(Self.commands).sorted() {
            Issue.record("\(Self.page) documents `imagent \(name)`, which does not exist")
        }
        for name in Self.commands.subtracting(documented).sorted() {
            Issue.record("`imagent \(name)` exists but \(Self.page) does not document it under COMMANDS")
        }
    }
}
