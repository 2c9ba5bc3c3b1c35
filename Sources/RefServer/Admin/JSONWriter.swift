/// Builds one line of JSON by hand: the server avoids Foundation, and the
/// stats object is small and flat enough not to need a library.
struct JSONWriter {
    private(set) var text = ""
    private var needsComma = [false]

    mutating func beginObject(_ key: String? = nil) { open(key, "{") }
    mutating func endObject() { close("}") }
    mutating func beginArray(_ key: String? = nil) { open(key, "[") }
    mutating func endArray() { close("]") }

    mutating func field(_ key: String, _ value: some BinaryInteger) {
        separate(key)
        text += String(value)
    }

    mutating func field(_ key: String, _ value: Bool) {
        separate(key)
        text += value ? "true" : "false"
    }

    mutating func field(_ key: String, _ value: String) {
        separate(key)
        text += Self.quoted(value)
    }

    static func quoted(_ string: String) -> String {
        var result = "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }

    private mutating func open(_ key: String?, _ bracket: String) {
        separate(key)
        text += bracket
        needsComma.append(false)
    }

    private mutating func close(_ bracket: String) {
        needsComma.removeLast()
        text += bracket
    }

    private mutating func separate(_ key: String?) {
        if needsComma[needsComma.count - 1] { text += "," }
        needsComma[needsComma.count - 1] = true
        if let key { text += Self.quoted(key) + ":" }
    }
}
