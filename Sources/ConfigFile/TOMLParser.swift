/// A strict parser for the subset of TOML 1.0 that configuration files need:
/// `[table]` and `[a.b]` headers, `key = value` with bare, quoted and dotted
/// keys, basic and literal strings, integers (decimal, 0x, 0o, 0b, `_`
/// separators), floats, booleans, and arrays (over several lines, with
/// comments and a trailing comma). Inline tables, multi-line strings, dates
/// and arrays of tables are refused with a message that says so.
///
/// Why not TOMLKit: it imports Foundation (about 6 MB more RSS in a daemon
/// that otherwise runs without it) and cannot say on which line a key
/// stands, which every validation message here needs.
public struct TOMLParser {
    public struct Failure: Error, Hashable, Sendable, CustomStringConvertible {
        public var line: Int
        public var column: Int
        public var message: String
        public var description: String { "\(line):\(column): \(message)" }
    }

    private var bytes: [UInt8]
    private var index = 0
    private var line = 1
    private var lineStart = 0

    public static func parse(_ text: String) throws(Failure) -> TOMLTable {
        var parser = TOMLParser(bytes: Array(text.utf8))
        return try parser.document()
    }

    private init(bytes: [UInt8]) { self.bytes = bytes }

    private var column: Int { index - lineStart + 1 }
    private var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    private func fail(_ message: String) -> Failure {
        Failure(line: line, column: column, message: message)
    }

    private mutating func document() throws(Failure) -> TOMLTable {
        var root = TOMLTable()
        var path: [String] = []
        while true {
            skipBlank()
            guard let byte = current else { return root }
            if byte == UInt8(ascii: "\n") {
                newline()
                continue
            }
            if byte == UInt8(ascii: "[") {
                let headerLine = line
                index += 1
                guard current != UInt8(ascii: "[") else { throw fail("arrays of tables ([[…]]) are not supported here") }
                skipSpaces()
                path = try keyPath()
                skipSpaces()
                guard current == UInt8(ascii: "]") else { throw fail("expected ] to close the table header") }
                index += 1
                try endOfLine()
                try root.openTable(path, line: headerLine)
            } else {
                let keyLine = line
                let keyColumn = column
                let keys = try keyPath()
                skipSpaces()
                guard current == UInt8(ascii: "=") else { throw fail("expected = after the key \"\(keys.joined(separator: "."))\"") }
                index += 1
                skipSpaces()
                let value = try self.value()
                try endOfLine()
                do {
                    try root.assign(path + keys, value, line: keyLine)
                } catch let message as AssignFailure {
                    throw Failure(line: keyLine, column: keyColumn, message: message.text)
                } catch {
                    preconditionFailure("assign throws only AssignFailure")
                }
            }
        }
    }

    // MARK: lexical pieces

    private mutating func newline() {
        index += 1
        line += 1
        lineStart = index
    }

    private mutating func skipSpaces() {
        while let byte = current, byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") { index += 1 }
    }

    /// Spaces, a comment, and a `\r` before the newline.
    private mutating func skipBlank() {
        skipSpaces()
        if current == UInt8(ascii: "#") {
            while let byte = current, byte != UInt8(ascii: "\n") { index += 1 }
        }
        if current == UInt8(ascii: "\r"), index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "\n") { index += 1 }
    }

    private mutating func endOfLine() throws(Failure) {
        skipBlank()
        guard let byte = current else { return }
        guard byte == UInt8(ascii: "\n") else { throw fail("unexpected text after the value; one key = value per line") }
        newline()
    }

    /// Blank space, comments and newlines inside an array.
    private mutating func skipArraySpace() {
        while true {
            skipBlank()
            guard current == UInt8(ascii: "\n") else { return }
            newline()
        }
    }

    private static func isBare(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: "-"):
            true
        default:
            false
        }
    }

    private mutating func keyPath() throws(Failure) -> [String] {
        var keys: [String] = []
        while true {
            skipSpaces()
            switch current {
            case UInt8(ascii: "\""):
                keys.append(try basicString())
            case UInt8(ascii: "'"):
                keys.append(try literalString())
            case let byte? where Self.isBare(byte):
                let start = index
                while let byte = current, Self.isBare(byte) { index += 1 }
                keys.append(String(decoding: bytes[start..<index], as: UTF8.self))
            default:
                throw fail("expected a key")
            }
            skipSpaces()
            guard current == UInt8(ascii: ".") else { return keys }
            index += 1
        }
    }

    private mutating func value() throws(Failure) -> TOMLValue {
        guard let byte = current else { throw fail("expected a value") }
        switch byte {
        case UInt8(ascii: "\""):
            if bytes[index...].starts(with: "\"\"\"".utf8) { throw fail("multi-line strings are not supported here") }
            return .string(try basicString())
        case UInt8(ascii: "'"):
            if bytes[index...].starts(with: "'''".utf8) { throw fail("multi-line strings are not supported here") }
            return .string(try literalString())
        case UInt8(ascii: "["):
            return .array(try array())
        case UInt8(ascii: "{"):
            throw fail("inline tables are not supported here; write a [table] section instead")
        default:
            return try scalar()
        }
    }

    private mutating func array() throws(Failure) -> [TOMLValue] {
        index += 1
        var elements: [TOMLValue] = []
        while true {
            skipArraySpace()
            if current == UInt8(ascii: "]") {
                index += 1
                return elements
            }
            elements.append(try value())
            skipArraySpace()
            switch current {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "]"): continue
            default: throw fail("expected , or ] in the array")
            }
        }
    }

    /// Booleans and numbers: everything up to a delimiter.
    private mutating func scalar() throws(Failure) -> TOMLValue {
        let start = index
        let startColumn = column
        while let byte = current, ![UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"),
                                   UInt8(ascii: ","), UInt8(ascii: "]"), UInt8(ascii: "#")].contains(byte) {
            index += 1
        }
        let word = String(decoding: bytes[start..<index], as: UTF8.self)
        if word == "true" { return .boolean(true) }
        if word == "false" { return .boolean(false) }
        if let integer = Self.integer(word) { return .integer(integer) }
        if let float = Self.float(word) { return .float(float) }
        let hint = word.isEmpty ? "a value is missing" : "\"\(word)\" is not a TOML value (strings need quotes)"
        throw Failure(line: line, column: startColumn, message: hint)
    }

    private static func integer(_ word: String) -> Int64? {
        var text = Substring(word)
        // Adjacent underscores compared byte by byte: `contains("__")` would link _StringProcessing
        // (the regex engine, 800 KiB of text) into the daemon for this one check.
        let doubled = zip(text.utf8, text.utf8.dropFirst()).contains { $0 == UInt8(ascii: "_") && $1 == UInt8(ascii: "_") }
        guard !text.hasPrefix("_"), !text.hasSuffix("_"), !doubled else { return nil }
        var radix = 10
        var sign: Int64 = 1
        if text.hasPrefix("+") || text.hasPrefix("-") {
            sign = text.hasPrefix("-") ? -1 : 1
            text = text.dropFirst()
        } else {
            for (prefix, base) in [("0x", 16), ("0o", 8), ("0b", 2)] where text.hasPrefix(prefix) {
                radix = base
                text = text.dropFirst(2)
            }
        }
        let digits = text.filter { $0 != "_" }
        guard !digits.isEmpty, !(radix == 10 && digits.count > 1 && digits.hasPrefix("0")) else { return nil }
        guard let magnitude = Int64(digits, radix: radix) else { return nil }
        return sign * magnitude
    }

    private static func float(_ word: String) -> Double? {
        let digits = word.filter { $0 != "_" }
        guard digits.contains(where: { $0 == "." || $0 == "e" || $0 == "E" }),
              digits.allSatisfy({ $0.isNumber || "+-.eE".contains($0) }) else { return nil }
        return Double(digits)
    }

    private mutating func literalString() throws(Failure) -> String {
        index += 1
        let start = index
        while let byte = current, byte != UInt8(ascii: "'") {
            guard byte != UInt8(ascii: "\n") else { throw fail("unterminated string") }
            index += 1
        }
        guard current != nil else { throw fail("unterminated string") }
        defer { index += 1 }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    private mutating func basicString() throws(Failure) -> String {
        index += 1
        var scalars = String.UnicodeScalarView()
        var pending: [UInt8] = []
        func flush() {
            scalars.append(contentsOf: String(decoding: pending, as: UTF8.self).unicodeScalars)
            pending.removeAll(keepingCapacity: true)
        }
        while let byte = current {
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                flush()
                return String(scalars)
            case UInt8(ascii: "\n"):
                throw fail("unterminated string")
            case UInt8(ascii: "\\"):
                flush()
                index += 1
                scalars.append(try escape())
            default:
                pending.append(byte)
                index += 1
            }
        }
        throw fail("unterminated string")
    }

    private mutating func escape() throws(Failure) -> Unicode.Scalar {
        guard let byte = current else { throw fail("unterminated string") }
        index += 1
        switch byte {
        case UInt8(ascii: "n"): return "\n"
        case UInt8(ascii: "t"): return "\t"
        case UInt8(ascii: "r"): return "\r"
        case UInt8(ascii: "b"): return "\u{08}"
        case UInt8(ascii: "f"): return "\u{0C}"
        case UInt8(ascii: "\""): return "\""
        case UInt8(ascii: "\\"): return "\\"
        case UInt8(ascii: "u"), UInt8(ascii: "U"):
            let count = byte == UInt8(ascii: "u") ? 4 : 8
            guard index + count <= bytes.count,
                  let code = UInt32(String(decoding: bytes[index..<(index + count)], as: UTF8.self), radix: 16),
                  let scalar = Unicode.Scalar(code)
            else { throw fail("invalid \\\(Character(Unicode.Scalar(byte))) escape") }
            index += count
            return scalar
        default:
            throw fail("invalid escape \\\(Character(Unicode.Scalar(byte)))")
        }
    }
}

private struct AssignFailure: Error { var text: String }

extension TOMLTable {
    /// `[a.b]`: makes the path exist as tables; a table may be headed only once.
    fileprivate mutating func openTable(_ path: [String], line: Int) throws(TOMLParser.Failure) {
        do {
            try descend(path, line: line) { table, key in
                if let existing = table[key] {
                    guard case .table(var child) = existing.value else {
                        throw AssignFailure(text: "\"\(key)\" was already given a value on line \(existing.line)")
                    }
                    guard !child.isExplicit else {
                        throw AssignFailure(text: "table [\(path.joined(separator: "."))] is defined twice (first on line \(existing.line))")
                    }
                    child.isExplicit = true
                    table.set(key, .table(child), line: line)
                } else {
                    var child = TOMLTable()
                    child.isExplicit = true
                    table.set(key, .table(child), line: line)
                }
            }
        } catch let failure as AssignFailure {
            throw TOMLParser.Failure(line: line, column: 1, message: failure.text)
        } catch {
            preconditionFailure("descend throws only AssignFailure")
        }
    }

    fileprivate mutating func assign(_ path: [String], _ value: TOMLValue, line: Int) throws {
        try descend(path, line: line) { table, key in
            if let existing = table[key] {
                throw AssignFailure(text: "\"\(key)\" is set twice (first on line \(existing.line))")
            }
            table.set(key, value, line: line)
        }
    }

    /// Walks to the table that holds the last key of `path`, creating
    /// implicit tables on the way, and applies `body` there.
    private mutating func descend(_ path: [String], line: Int, _ body: (inout TOMLTable, String) throws -> Void) throws {
        guard path.count > 1 else { return try body(&self, path[0]) }
        let key = path[0]
        var child: TOMLTable
        if let existing = self[key] {
            guard case .table(let table) = existing.value else {
                throw AssignFailure(text: "\"\(key)\" is \(existing.value.typeName) (line \(existing.line)), not a table")
            }
            child = table
        } else {
            child = TOMLTable()
        }
        try child.descend(Array(path.dropFirst()), line: line, body)
        set(key, .table(child), line: self[key]?.line ?? line)
    }
}
