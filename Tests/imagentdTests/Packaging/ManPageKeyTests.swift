import Testing

@testable import IMAgentCore

/// imagentd.toml(5) and the loader agree: every key the page documents is
/// accepted, and every key the loader accepts is documented. A documented
/// key that does not work is a defect, and so is a working one nobody can
/// find.
@Suite struct ManPageKeyTests {
    static let page = "man/imagentd.toml.5"

    /// The keys of the page's TABLES AND KEYS section: `.SS [table]` headings,
    /// and the bold words of the line after each `.TP` or `.TQ`.
    static func documentedKeys(_ text: String) -> Set<String> {
        var keys: Set<String> = []
        var table: String?
        var inSection = false
        var afterTP = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if line.hasPrefix(".SH ") {
                inSection = line == ".SH TABLES AND KEYS"
                table = nil
                continue
            }
            guard inSection else { continue }
            if line.hasPrefix(".SS [") {
                table = String(line.dropFirst(5).prefix { $0 != "]" })
            } else if line == ".TP" || line == ".TQ" {
                afterTP = true
                continue
            } else if afterTP, let table, line.hasPrefix(".B") {
                for key in boldWords(line) where key.allSatisfy({ $0.isLowercase || $0 == "_" }) && !key.isEmpty {
                    keys.insert("\(table).\(key)")
                }
            }
            afterTP = false
        }
        return keys
    }

    /// `.BR a ", " b " (x)"` → a, b: the words in bold (every other argument of
    /// .BR, every argument of .B, the first of .BI).
    static func boldWords(_ line: String) -> [String] {
        let macro = String(line.prefix { $0 != " " })
        var arguments: [String] = []
        var current = ""
        var quoted = false
        for character in line.dropFirst(macro.count) {
            if character == "\"" {
                quoted.toggle()
            } else if character == " " && !quoted {
                if !current.isEmpty { arguments.append(current) }
                current = ""
            } else {
                current.append(character)
            }
        }
        if !current.isEmpty { arguments.append(current) }
        switch macro {
        case ".B": return arguments
        case ".BR", ".BI": return arguments.enumerated().filter { $0.offset % 2 == 0 }.map(\.element)
        default: return []
        }
    }

    @Test func everyDocumentedKeyIsAccepted_andEveryAcceptedKeyDocumented() {
        let documented = Self.documentedKeys(readRepositoryFile(Self.page))
        let accepted = Set(ConfigLoader.acceptedKeys)
        #expect(documented.count > 20, "the parser found too few keys in \(Self.page): \(documented.sorted())")
        for key in documented.subtracting(accepted).sorted() {
            Issue.record("\(Self.page) documents \(key), which the loader (ConfigLoader) does not accept")
        }
        for key in accepted.subtracting(documented).sorted() {
            Issue.record("the loader accepts \(key), which \(Self.page) does not document (add it under .SS [\(key.split(separator: ".").dropLast().joined(separator: "."))])")
        }
    }

    @Test func theParser_readsTheMacrosThePageUses() {
        #expect(Self.boldWords(#".BR certificate_file ", " private_key_file " (paths; default: none)""#)
            == ["certificate_file", "private_key_file"])
        #expect(Self.documentedKeys(".SH TABLES AND KEYS\n.SS [a.b]\n.TP\n.BR x_y \" (int)\"\n.SH NEXT\n.SS [c]\n.TP\n.B z\n")
            == ["a.b.x_y"])
    }
}
