import ConfigFile
import FuzzReplay
@testable import IMAgentCore

/// libFuzzer entry point: any bytes as the text of `imagentd.toml`, through the
/// TOML parser and then the daemon's configuration loader, as `imagentd
/// --check-config` reads a file.
///
/// Neither may crash or hang, and every problem either reports names a line of
/// the text (1 to its number of lines) and, for the parser, a column within it:
/// operators are sent to that line.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTOML(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let text = String(decoding: UnsafeRawBufferPointer(start: start, count: count), as: UTF8.self)
    let lines = text.utf8.reduce(1) { $1 == UInt8(ascii: "\n") ? $0 + 1 : $0 }
    do {
        let document = try TOMLParser.parse(text)
        checkLines(document, lines: lines)
    } catch {
        precondition((1...lines).contains(error.line), "parser failure on line \(error.line) of \(lines): \(error)")
        precondition(error.column >= 1, "parser failure at column \(error.column): \(error)")
        precondition(!error.message.isEmpty)
    }
    do {
        _ = try ConfigLoader.load(text: text, file: "fuzz.toml")
    } catch {
        precondition(!error.problems.isEmpty, "the loader failed without a problem")
        for problem in error.problems {
            precondition((1...lines).contains(problem.line), "loader problem on line \(problem.line) of \(lines): \(problem)")
        }
    }
    return 0
}

/// Every key of the document, at any depth, stands on a line of the text.
private func checkLines(_ table: TOMLTable, lines: Int) {
    for entry in table.entries {
        precondition((1...lines).contains(entry.line), "key \(entry.key) on line \(entry.line) of \(lines)")
        if case .table(let child) = entry.value { checkLines(child, lines: lines) }
    }
}

#if !FUZZING
@main
struct ReplayTOMLInputs {
    static func main() { replayInputs(tool: "fuzz-toml", through: fuzzTOML) }
}
#endif
