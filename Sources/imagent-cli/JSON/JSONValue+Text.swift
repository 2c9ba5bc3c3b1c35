import JSONText
/// Writes a document back out in its member order: compact for `--json`
/// (one document per line), indented where a person reads it.
extension JSONValue {
    var compactText: String {
        var out = ""
        Self.write(self, into: &out, indent: nil, level: 0)
        return out
    }

    var prettyText: String {
        var out = ""
        Self.write(self, into: &out, indent: "  ", level: 0)
        return out
    }

    /// An object from pairs, for the CLI's own JSON output.
    static func object(_ members: KeyValuePairs<String, JSONValue>) -> JSONValue {
        .object(members.map { Member(key: $0.key, value: $0.value) })
    }

    /// A number from an integer, which is always valid JSON.
    static func integer(_ value: some BinaryInteger) -> JSONValue {
        .number(String(value))
    }

    /// `text` as a JSON string literal, quotes and escapes included.
    static func quoted(_ text: String) -> String {
        var out = ""
        writeString(text, into: &out)
        return out
    }

    private static func write(_ value: JSONValue, into out: inout String, indent: String?, level: Int) {
        switch value {
        case .null: out += "null"
        case .bool(let flag): out += flag ? "true" : "false"
        case .number(let text): out += text
        case .string(let text): writeString(text, into: &out)
        case .array(let elements):
            writeContainer(open: "[", close: "]", count: elements.count, into: &out, indent: indent, level: level) {
                index, out in write(elements[index], into: &out, indent: indent, level: level + 1)
            }
        case .object(let members):
            writeContainer(open: "{", close: "}", count: members.count, into: &out, indent: indent, level: level) {
                index, out in
                writeString(members[index].key, into: &out)
                out += indent == nil ? ":" : ": "
                write(members[index].value, into: &out, indent: indent, level: level + 1)
            }
        }
    }

    private static func writeContainer(open: String, close: String, count: Int, into out: inout String,
                                       indent: String?, level: Int, element: (Int, inout String) -> Void) {
        out += open
        guard count > 0 else { return out += close }
        for index in 0..<count {
            if index > 0 { out += "," }
            if let indent { out += "\n" + String(repeating: indent, count: level + 1) }
            element(index, &out)
        }
        if let indent { out += "\n" + String(repeating: indent, count: level) }
        out += close
    }

    private static func writeString(_ text: String, into out: inout String) {
        out += JSONWriter.quoted(text)
    }
}
