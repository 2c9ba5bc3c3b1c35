#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Where the CLI writes: results to stdout, diagnostics to stderr.
enum Output {
    /// One line of results. Flushed at once, because `watch` and `listen`
    /// are read live through pipes, where stdout is otherwise block-buffered.
    /// Controls in it are escaped (`TerminalText`): it may carry daemon text.
    static func line(_ text: String) {
        print(TerminalText.escapedLines(text))
        flush()
    }

    /// Several lines of results.
    static func lines(_ texts: [String]) {
        for text in texts { print(TerminalText.escapedLines(text)) }
        flush()
    }

    /// One JSON document on one line.
    static func json(_ value: JSONValue) {
        line(value.compactText)
    }

    /// A diagnostic, prefixed with the program's name.
    static func error(_ text: String) {
        raw(toStandardError: "imagent: \(TerminalText.escapedLines(text))\n")
    }

    /// Text as it is, e.g. ArgumentParser's usage messages. Written with
    /// write(2): stderr is unbuffered anyway, and the C `stderr` global is
    /// not concurrency-safe for Swift 6.
    static func raw(toStandardError text: String) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
            guard written > 0 else { return }
            bytes = bytes.dropFirst(written)
        }
    }

    /// Ends the process with `status`, after flushing what was printed.
    static func terminate(_ status: Int32) -> Never {
        flush()
        exit(status)
    }

    /// fflush(NULL) flushes stdout without naming the C global.
    private static func flush() {
        fflush(nil)
    }
}
