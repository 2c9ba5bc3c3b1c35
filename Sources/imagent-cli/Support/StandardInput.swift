#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads stdin as bytes (payloads need not be text), either whole or line by
/// line as lines arrive, so that `tail -f log | imagent send 7 --lines` sends
/// each line when it is written, not at the end.
struct StandardInput {
    private var pending: [UInt8] = []
    private var atEnd = false

    static var isTerminal: Bool { isatty(STDIN_FILENO) == 1 }

    /// Everything until end of file.
    mutating func readAll() throws -> [UInt8] {
        while try fill() {}
        defer { pending.removeAll() }
        return pending
    }

    /// The next line without its "\n" (and without a "\r" before it); the
    /// last line needs no newline. Nil at end of file.
    mutating func nextLine() throws -> [UInt8]? {
        while true {
            if let newline = pending.firstIndex(of: 0x0A) {
                var line = Array(pending[..<newline])
                pending.removeSubrange(...newline)
                if line.last == 0x0D { line.removeLast() }
                return line
            }
            if atEnd {
                guard !pending.isEmpty else { return nil }
                defer { pending.removeAll() }
                return pending
            }
            _ = try fill()
        }
    }

    /// Reads once; false at end of file.
    private mutating func fill() throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(STDIN_FILENO, $0.baseAddress, $0.count) }
            if count > 0 {
                pending.append(contentsOf: chunk[..<count])
                return true
            }
            if count == 0 {
                atEnd = true
                return false
            }
            guard errno == EINTR else {
                throw CLIFailure(message: "cannot read standard input: \(String(cString: strerror(errno)))",
                                 status: .usage)
            }
        }
    }
}
