/// `label: value` lines with the values aligned, plus whatever fields of a
/// JSON object the caller did not know, so that a newer daemon's additions
/// still show up (generically) rather than vanish.
struct FieldList {
    private(set) var rows: [(label: String, value: String)] = []

    mutating func add(_ label: String, _ value: String) {
        rows.append((label, value))
    }

    /// Adds every member of `object` not in `known`, nested objects flattened
    /// as `prefix.key.subkey`.
    mutating func addUnknown(of object: JSONValue?, known: Set<String>, prefix: String) {
        for member in object?.members ?? [] where !known.contains(member.key) {
            addFlattened(member.value, label: "\(prefix).\(member.key)")
        }
    }

    private mutating func addFlattened(_ value: JSONValue, label: String) {
        if let members = value.members, !members.isEmpty {
            for member in members { addFlattened(member.value, label: "\(label).\(member.key)") }
        } else {
            add(label, value.displayText)
        }
    }

    var lines: [String] {
        let width = rows.map(\.label.count).max() ?? 0
        return rows.map { row in
            row.label + ":" + String(repeating: " ", count: width - row.label.count + 2) + row.value
        }
    }
}
