/// A strict JSON parser (RFC 8259) for the documents the daemon sends:
/// small, so the CLI needs no Foundation, and order-keeping (see `JSONValue`).
struct JSONParser {
    struct SyntaxError: Error, CustomStringConvertible {
        var offset: Int
        var reason: String
        var description: String { "invalid JSON at byte \(offset): \(reason)" }
    }

    /// Deep enough for any real document, shallow enough that a hostile one
    /// cannot exhaust the stack.
    static let maximumDepth = 256

    private let bytes: [UInt8]
    private var index = 0

    static func parse(_ text: String) throws(SyntaxError) -> JSONValue {
        var parser = JSONParser(bytes: Array(text.utf8))
        parser.skipWhitespace()
        let value = try parser.value(depth: 0)
        parser.skipWhitespace()
        guard parser.index == parser.bytes.count else { throw parser.error("unexpected text after the document") }
        return value
    }

    private init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    private mutating func value(depth: Int) throws(SyntaxError) -> JSONValue {
        guard depth < Self.maximumDepth else { throw error("nested deeper than \(Self.maximumDepth) levels") }
        guard let byte = peek() else { throw error("unexpected end of the document") }
        switch byte {
        case UInt8(ascii: "{"): return try object(depth: depth)
        case UInt8(ascii: "["): return try array(depth: depth)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
        default: throw error("unexpected character")
        }
    }

    private mutating func object(depth: Int) throws(SyntaxError) -> JSONValue {
        index += 1
        var members: [JSONValue.Member] = []
        skipWhitespace()
        if peek() == UInt8(ascii: "}") {
            index += 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard peek() == UInt8(ascii: "\"") else { throw error("expected a member name") }
            let key = try string()
            skipWhitespace()
            try expect(":")
            skipWhitespace()
            members.append(.init(key: key, value: try value(depth: depth + 1)))
            skipWhitespace()
            if peek() == UInt8(ascii: ",") {
                index += 1
                continue
            }
            try expect("}")
            return .object(members)
        }
    }

    private mutating func array(depth: Int) throws(SyntaxError) -> JSONValue {
        index += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if peek() == UInt8(ascii: "]") {
            index += 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            elements.append(try value(depth: depth + 1))
            skipWhitespace()
            if peek() == UInt8(ascii: ",") {
                index += 1
                continue
            }
            try expect("]")
            return .array(elements)
        }
    }

    private mutating func string() throws(SyntaxError) -> String {
        index += 1
        var scalars = String.UnicodeScalarView()
        var run: [UInt8] = []
        func flushRun() {
            scalars.append(contentsOf: String(decoding: run, as: UTF8.self).unicodeScalars)
            run.removeAll(keepingCapacity: true)
        }
        while true {
            guard let byte = peek() else { throw error("unterminated string") }
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                flushRun()
                return String(scalars)
            case UInt8(ascii: "\\"):
                flushRun()
                scalars.append(try escape())
            case 0..<0x20:
                throw error("control character in a string")
            default:
                run.append(byte)
            }
        }
    }

    private mutating func escape() throws(SyntaxError) -> Unicode.Scalar {
        guard let byte = peek() else { throw error("unterminated escape") }
        index += 1
        switch byte {
        case UInt8(ascii: "\""): return "\""
        case UInt8(ascii: "\\"): return "\\"
        case UInt8(ascii: "/"): return "/"
        case UInt8(ascii: "b"): return "\u{08}"
        case UInt8(ascii: "f"): return "\u{0C}"
        case UInt8(ascii: "n"): return "\n"
        case UInt8(ascii: "r"): return "\r"
        case UInt8(ascii: "t"): return "\t"
        case UInt8(ascii: "u"):
            let first = try hexQuad()
            if (0xD800..<0xDC00).contains(first), bytes[index...].starts(with: Array("\\u".utf8)) {
                index += 2
                let second = try hexQuad()
                guard (0xDC00..<0xE000).contains(second) else { throw error("unpaired surrogate") }
                let combined = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
                return Unicode.Scalar(combined) ?? "\u{FFFD}"
            }
            // A lone surrogate has no scalar; the replacement character says so.
            return Unicode.Scalar(first) ?? "\u{FFFD}"
        default:
            throw error("unknown escape")
        }
    }

    private mutating func hexQuad() throws(SyntaxError) -> UInt32 {
        guard index + 4 <= bytes.count,
              let value = UInt32(String(decoding: bytes[index..<index + 4], as: UTF8.self), radix: 16)
        else { throw error("expected four hex digits") }
        index += 4
        return value
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    private mutating func number() throws(SyntaxError) -> String {
        let start = index
        if peek() == UInt8(ascii: "-") { index += 1 }
        if peek() == UInt8(ascii: "0") {
            index += 1
        } else {
            guard digits() > 0 else { throw error("expected a digit") }
        }
        if peek() == UInt8(ascii: ".") {
            index += 1
            guard digits() > 0 else { throw error("expected a digit after the decimal point") }
        }
        if peek() == UInt8(ascii: "e") || peek() == UInt8(ascii: "E") {
            index += 1
            if peek() == UInt8(ascii: "+") || peek() == UInt8(ascii: "-") { index += 1 }
            guard digits() > 0 else { throw error("expected a digit in the exponent") }
        }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    private mutating func digits() -> Int {
        let start = index
        while let byte = peek(), (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) { index += 1 }
        return index - start
    }

    private mutating func literal(_ word: String) throws(SyntaxError) {
        let expected = Array(word.utf8)
        guard bytes[index...].starts(with: expected) else { throw error("expected \(word)") }
        index += expected.count
    }

    private mutating func expect(_ character: Unicode.Scalar) throws(SyntaxError) {
        guard peek() == UInt8(ascii: character) else { throw error("expected '\(character)'") }
        index += 1
    }

    private mutating func skipWhitespace() {
        while let byte = peek(), byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 { index += 1 }
    }

    private func peek() -> UInt8? {
        index < bytes.count ? bytes[index] : nil
    }

    private func error(_ reason: String) -> SyntaxError {
        SyntaxError(offset: index, reason: reason)
    }
}
