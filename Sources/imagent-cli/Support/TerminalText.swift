/// Text from imagentd (service names, client names, error messages, members of
/// its JSON documents) made safe for a terminal: another local user chooses a
/// service name, and an escape sequence in it would retitle, recolour or
/// rewrite the screen of the admin who lists sessions. Every code point that
/// a terminal may act on is written `\u{1B}` instead:
///
/// - the C0 controls (U+0000–U+001F: ESC, BEL, CR, line breaks, tabs), DEL
///   and the C1 controls (U+007F–U+009F: U+009B is CSI to some terminals);
/// - U+2028 and U+2029, which some terminals and viewers break lines on;
/// - the bidirectional controls (U+061C, U+200E, U+200F, U+202A–U+202E,
///   U+2066–U+2069), which reorder what follows them on screen, so a name
///   could display as another one.
///
/// Every human-readable printer goes through it: `JSONValue.displayText` for
/// each field, and `Output` for each whole line (a message built around
/// daemon text). JSON output needs nothing more: `JSONWriter.quoted` escapes
/// the same code points by JSON's rules.
enum TerminalText {
    static func isUnsafe(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x0000...0x001F, 0x007F...0x009F: true
        case 0x2028, 0x2029: true
        case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }

    /// `text` with every unsafe code point escaped, line breaks included: one field, one line.
    static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isUnsafe) else { return text }
        var out = ""
        for scalar in text.unicodeScalars {
            if isUnsafe(scalar) {
                out += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// The same, keeping the line feeds between lines: for text the CLI laid out in lines itself.
    static func escapedLines(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isUnsafe) else { return text }
        return text.split(separator: "\n", omittingEmptySubsequences: false).map { escaped(String($0)) }.joined(separator: "\n")
    }
}
