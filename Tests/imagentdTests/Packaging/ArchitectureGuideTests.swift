import Foundation
import Testing

/// docs/architecture.md names only what exists: a renamed type or a moved folder fails here (issue 28).
///
/// The extraction rule (the guide states it too, in an HTML comment at its top):
/// - Outside fenced code blocks, every `backticked` token is read up to its first space:
///   - one that starts with `Sources/`, `Tests/`, `scripts/`, `docs/` or `man/` is a path of the
///     repository that must exist (a folder when it ends with `/`);
///   - one that ends with `.swift` is a file that must exist somewhere under Sources/;
///   - one that is an UpperCamelCase name (`Name`: a capital, then letters and digits, at least one
///     of them lower case), or `Name.member`, names a type that must be declared under Sources/ as
///     `struct`, `class`, `enum`, `actor` or `protocol Name`.
/// - Inside fenced code blocks (the pictures), every word with a `/` whose last part is an
///   UpperCamelCase name names either a file (`Dir/File.swift`) or a type declared in a file of
///   that folder (`Dir/Name`, `Dir/Name.member`), the folder under Sources/IMAgentCore/ or Sources/;
///   every `File.swift` is a file under Sources/; every `Name.member` names a declared type.
@Suite struct ArchitectureGuideTests {
    static let guide = "docs/architecture.md"

    /// The repository's root, from this file's path (Tests/imagentdTests/Packaging/…).
    static let root: String = {
        var path = #filePath
        for _ in 0..<4 { path = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)]) }
        return path
    }()

    /// Every Swift file under Sources/, relative to the root, with the types it declares.
    static let declarations: [String: Set<String>] = {
        let sources = root + "/Sources"
        var result: [String: Set<String>] = [:]
        let declaration = /(?:struct|class|enum|actor|protocol)\s+([A-Z][A-Za-z0-9_]*)/
        guard let files = FileManager.default.enumerator(atPath: sources) else { return [:] }
        while let relative = files.nextObject() as? String {
            guard relative.hasSuffix(".swift") else { continue }
            let text = (try? String(contentsOfFile: sources + "/" + relative, encoding: .utf8)) ?? ""
            result["Sources/" + relative] = Set(text.matches(of: declaration).map { String($0.output.1) })
        }
        return result
    }()

    static var declaredTypes: Set<String> { declarations.values.reduce(into: Set()) { $0.formUnion($1) } }

    /// `Name` or `Name.member`, Name UpperCamelCase with a lower-case letter: the type's name.
    static func typeName(_ token: String) -> String? {
        let name = String(token.prefix { $0 != "." })
        guard let first = name.first, first.isUppercase, name.contains(where: { $0.isLowercase }),
              name.allSatisfy({ $0.isLetter || $0.isNumber }) else { return nil }
        return name
    }

    static func exists(_ relative: String) -> Bool {
        var isFolder: ObjCBool = false
        let found = FileManager.default.fileExists(atPath: root + "/" + relative, isDirectory: &isFolder)
        return found && (!relative.hasSuffix("/") || isFolder.boolValue)
    }

    static func swiftFileExists(named name: String) -> Bool {
        declarations.keys.contains { $0.hasSuffix("/" + name) }
    }

    /// The guide's prose and its pictures, apart.
    static func parts() -> (prose: String, pictures: String) {
        let text = (try? String(contentsOfFile: root + "/" + guide, encoding: .utf8)) ?? ""
        var (prose, pictures, inPicture) = ("", "", false)
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") { inPicture.toggle(); continue }
            if inPicture { pictures += line + "\n" } else { prose += line + "\n" }
        }
        return (prose, pictures)
    }

    /// What a rule found missing, for one token.
    static func problems(inProse prose: String) -> (checked: Int, missing: [String]) {
        let types = declaredTypes
        var (checked, missing) = (0, [String]())
        for match in prose.matches(of: /`([^`\n]+)`/) {
            let token = String(match.output.1.prefix { $0 != " " })
            if ["Sources/", "Tests/", "scripts/", "docs/", "man/"].contains(where: token.hasPrefix) {
                checked += 1
                if !exists(token) { missing.append("path \(token)") }
            } else if token.hasSuffix(".swift") {
                checked += 1
                if !swiftFileExists(named: token) { missing.append("file \(token)") }
            } else if let name = typeName(token) {
                checked += 1
                if !types.contains(name) { missing.append("type \(name) (from `\(token)`)") }
            }
        }
        return (checked, missing)
    }

    static func problems(inPictures pictures: String) -> (checked: Int, missing: [String]) {
        let types = declaredTypes
        var (checked, missing) = (0, [String]())
        let words = pictures.split(whereSeparator: { !($0.isLetter || $0.isNumber || "/.+_".contains($0)) })
        for word in words.map({ String($0).trimmingCharacters(in: CharacterSet(charactersIn: ".")) }) {
            if word.contains("/") {
                let folder = String(word[..<word.lastIndex(of: "/")!])
                let last = String(word[word.index(after: word.lastIndex(of: "/")!)...])
                if last.hasSuffix(".swift") {
                    checked += 1
                    if !exists("Sources/IMAgentCore/" + word) && !exists("Sources/" + word) { missing.append("file \(word)") }
                } else if let name = typeName(last) {
                    checked += 1
                    let inFolder = declarations.contains { path, names in
                        (path.hasPrefix("Sources/IMAgentCore/\(folder)/") || path.hasPrefix("Sources/\(folder)/")) && names.contains(name)
                    }
                    if !inFolder { missing.append("type \(name) in \(folder)/") }
                }
            } else if word.hasSuffix(".swift") {
                checked += 1
                if !swiftFileExists(named: word) { missing.append("file \(word)") }
            } else if word.contains("."), let name = typeName(word) {
                checked += 1
                if !types.contains(name) { missing.append("type \(name) (from \(word))") }
            }
        }
        return (checked, missing)
    }

    @Test func everyPathFileAndTypeTheGuideNames_exists() throws {
        let (prose, pictures) = Self.parts()
        try #require(!prose.isEmpty, "\(Self.guide) is missing")
        let inProse = Self.problems(inProse: prose)
        let inPictures = Self.problems(inPictures: pictures)
        #expect(inProse.missing.isEmpty, "\(Self.guide) names what does not exist: \(inProse.missing)")
        #expect(inPictures.missing.isEmpty, "\(Self.guide)'s pictures name what does not exist: \(inPictures.missing)")
        // The guide's code map and pictures are made of these names: a rule that checks nothing is broken.
        #expect(inProse.checked >= 100 && inPictures.checked >= 20, "checked \(inProse.checked) names in prose, \(inPictures.checked) in pictures")
    }

    @Test func theRulesCatchWhatDoesNotExist() {
        let prose = "`Sources/IMAgentCore/Sessions/` `Sources/NoSuchFolder/` `SessionRouter.clientSend` `NoSuchTypeAnywhere` "
            + "`scripts/test --filter X` `NoSuchFile.swift` `imagentd` `LOAD_TESTS`"
        #expect(Self.problems(inProse: prose).missing
            == ["path Sources/NoSuchFolder/", "type NoSuchTypeAnywhere (from `NoSuchTypeAnywhere`)", "file NoSuchFile.swift"])
        #expect(Self.problems(inProse: prose).checked == 6)
        let picture = "client ──SEND──▶ IPC/IPCClientHandler ─▶ Link/SessionRouter ─▶ Sessions/IO/Gone.swift ─▶ NoSuch.handle (Unix socket)"
        #expect(Self.problems(inPictures: picture).missing
            == ["type SessionRouter in Link/", "file Sessions/IO/Gone.swift", "type NoSuch (from NoSuch.handle)"])
    }

    /// The README leads to the guide.
    @Test func theReadmeLinksTheGuide() {
        let readme = (try? String(contentsOfFile: Self.root + "/README.md", encoding: .utf8)) ?? ""
        #expect(readme.contains("(docs/architecture.md)"))
    }
}
