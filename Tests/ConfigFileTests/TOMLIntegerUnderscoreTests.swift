import ConfigFile
import Testing

/// TOML's digit separators: one underscore between two digits, never at either end, never two in a row
/// (TOMLParser checks the pair byte by byte, without `String.contains`).
@Suite struct TOMLIntegerUnderscoreTests {
    @Test func singleUnderscoresBetweenDigits_areSeparators() throws {
        let document = try TOMLParser.parse("a = 1_000\nb = -2_5\nc = 1_2_3\n")
        #expect(document["a"]?.value == .integer(1_000))
        #expect(document["b"]?.value == .integer(-25))
        #expect(document["c"]?.value == .integer(123))
    }

    @Test(arguments: ["1__0", "1___0", "_1", "1_", "1_0__0"])
    func doubledOrOuterUnderscores_areNotIntegers(_ word: String) {
        #expect(throws: (any Error).self) { _ = try TOMLParser.parse("a = \(word)\n") }
    }
}
