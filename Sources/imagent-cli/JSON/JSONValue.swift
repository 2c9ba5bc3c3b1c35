/// A JSON document as the daemon sent it: objects keep their members in the
/// daemon's order (people read `status` top to bottom) and numbers keep their
/// text (a counter past 2^53 is printed exactly, not rounded by a Double).
indirect enum JSONValue: Hashable, Sendable {
    case null
    case bool(Bool)
    /// The number's literal text, already checked against the JSON grammar.
    case number(String)
    case string(String)
    case array([JSONValue])
    case object([Member])

    struct Member: Hashable, Sendable {
        var key: String
        var value: JSONValue
    }

    /// The member `key` of an object; nil for a missing key or a non-object.
    subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.key == key }?.value
    }

    var members: [Member]? {
        if case .object(let members) = self { members } else { nil }
    }

    var elements: [JSONValue]? {
        if case .array(let elements) = self { elements } else { nil }
    }

    var double: Double? {
        switch self {
        case .number(let text): Double(text)
        case .null, .bool, .string, .array, .object: nil
        }
    }

    var stringValue: String? {
        if case .string(let text) = self { text } else { nil }
    }

    /// How a value reads in a table or a `key: value` line: strings bare,
    /// numbers as sent, null as "-", containers as compact JSON.
    var displayText: String {
        switch self {
        case .null: "-"
        case .bool(let value): value ? "yes" : "no"
        case .number(let text): text
        case .string(let text): text.isEmpty ? "-" : TerminalText.escaped(text)
        case .array, .object: compactText
        }
    }
}

extension Optional where Wrapped == JSONValue {
    /// `displayText`, or "-" for a field the daemon did not send.
    var displayText: String { self?.displayText ?? "-" }
}

extension Optional where Wrapped == JSONValue {
    /// Member lookup through a value that may be missing, so that
    /// `status["link"]["rtt_ms"]` reads like the document's path.
    subscript(key: String) -> JSONValue? {
        self?[key]
    }
}
