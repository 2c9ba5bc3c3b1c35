/// Builds one line of JSON by hand: the daemon and the reference server stay
/// off Foundation, and their reports are small enough not to need a library.
///
/// ```
/// var json = JSONWriter()
/// json.beginObject()
/// json.field("state", "connected")
/// json.endObject()          // json.text == #"{"state":"connected"}"#
/// ```
public struct JSONWriter: Sendable {
    public private(set) var text = ""
    private var needsComma = [false]

    public init() {}

    public mutating func beginObject(_ key: String? = nil) { open(key, "{") }
    public mutating func endObject() { close("}") }
    public mutating func beginArray(_ key: String? = nil) { open(key, "[") }
    public mutating func endArray() { close("]") }

    public mutating func field(_ key: String, _ value: some BinaryInteger) {
        separate(key)
        text += String(value)
    }

    public mutating func field(_ key: String, _ value: Bool) {
        separate(key)
        text += value ? "true" : "false"
    }

    public mutating func field(_ key: String, _ value: String) {
        separate(key)
        text += Self.quoted(value)
    }

    /// A number with up to three decimals; JSON has no NaN or infinity, so those become null.
    public mutating func field(_ key: String, _ value: Double) {
        separate(key)
        guard value.isFinite else { text += "null"; return }
        let thousandths = (value * 1000).rounded()
        text += thousandths == thousandths.rounded(.towardZero) && abs(thousandths) < 1e15
            ? Self.decimal(Int64(thousandths)) : String(value)
    }

    /// Absent values are written as null, so readers see every key.
    public mutating func field(_ key: String, _ value: String?) {
        if let value { field(key, value) } else { null(key) }
    }

    public mutating func field<I: BinaryInteger>(_ key: String, _ value: I?) {
        if let value { field(key, value) } else { null(key) }
    }

    public mutating func field(_ key: String, _ value: Double?) {
        if let value { field(key, value) } else { null(key) }
    }

    public mutating func null(_ key: String) {
        separate(key)
        text += "null"
    }

    /// A value already in JSON form (a nested document built elsewhere).
    public mutating func raw(_ key: String, _ json: String) {
        separate(key)
        text += json
    }

    private static func decimal(_ thousandths: Int64) -> String {
        let sign = thousandths < 0 ? "-" : ""
        let magnitude = thousandths.magnitude
        let fraction = magnitude % 1000
        guard fraction != 0 else { return sign + String(magnitude / 1000) }
        var digits = String(fraction)
        digits = String(repeating: "0", count: 3 - digits.count) + digits
        while digits.hasSuffix("0") { digits.removeLast() }
        return "\(sign)\(magnitude / 1000).\(digits)"
    }

    /// U+2028, U+2029 and the bidirectional controls (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069).
    private static func isInvisibleControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x061C, 0x200E, 0x200F, 0x2028, 0x2029, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }

    public static func quoted(_ string: String) -> String {
        var result = "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            // JSON requires U+0000–U+001F escaped, and allows any other: DEL, the C1 controls,
            // U+2028/2029 and the bidirectional controls are too, so a document shown on a
            // terminal carries nothing a terminal acts on (imagent's TerminalText, for humans).
            case _ where scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || Self.isInvisibleControl(scalar):
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
