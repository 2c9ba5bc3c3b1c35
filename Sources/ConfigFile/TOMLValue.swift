/// A value of the TOML subset that configuration files use.
public enum TOMLValue: Hashable, Sendable {
    case string(String)
    case integer(Int64)
    case float(Double)
    case boolean(Bool)
    case array([TOMLValue])
    case table(TOMLTable)

    /// The TOML type name, for messages ("expected an integer, found a string").
    public var typeName: String {
        switch self {
        case .string: "a string"
        case .integer: "an integer"
        case .float: "a float"
        case .boolean: "a boolean"
        case .array: "an array"
        case .table: "a table"
        }
    }
}

/// A TOML table that remembers where each key was written.
public struct TOMLTable: Hashable, Sendable {
    public struct Entry: Hashable, Sendable {
        public var key: String
        public var value: TOMLValue
        /// 1-based line of the key (or of the `[table]` header for a table).
        public var line: Int
    }

    /// Entries in the order they appear in the file.
    public private(set) var entries: [Entry] = []
    /// Whether the table was opened with a `[header]` of its own, as opposed to
    /// being implied by a dotted key or a deeper header.
    var isExplicit = false

    public init() {}

    public subscript(key: String) -> Entry? {
        entries.first { $0.key == key }
    }

    mutating func set(_ key: String, _ value: TOMLValue, line: Int) {
        if let index = entries.firstIndex(where: { $0.key == key }) {
            entries[index] = Entry(key: key, value: value, line: line)
        } else {
            entries.append(Entry(key: key, value: value, line: line))
        }
    }
}
