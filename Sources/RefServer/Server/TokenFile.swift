#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The accepted tokens: each non-empty line of a file, surrounding blanks
/// ignored. Read anew at every LOGIN so a test can rotate tokens while the
/// server runs; the file is small and local, so the read is a few
/// microseconds on the event loop.
enum TokenFile {
    enum ReadError: Error, CustomStringConvertible {
        case unreadable(path: String, errno: Int32)
        case tooLarge(path: String)

        var description: String {
            switch self {
            case .unreadable(let path, let errno): "cannot read token file \(path): \(String(cString: strerror(errno)))"
            case .tooLarge(let path): "token file \(path) is larger than \(TokenFile.maxSize) bytes; is it the right file?"
            }
        }
    }

    /// Refuses files above this size: a token file is a handful of lines.
    static let maxSize = 1 << 20

    static func accepts(_ token: some Collection<UInt8>, path: String) throws(ReadError) -> Bool {
        let contents = try load(path)
        let wanted = Array(token)
        guard !wanted.isEmpty else { return false }
        for line in contents.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true) {
            if Array(trimmed(line)) == wanted { return true }
        }
        return false
    }

    private static func trimmed(_ line: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        let blank: (UInt8) -> Bool = { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") || $0 == UInt8(ascii: "\r") }
        guard let first = line.firstIndex(where: { !blank($0) }), let last = line.lastIndex(where: { !blank($0) }) else {
            return []
        }
        return line[first...last]
    }

    private static func load(_ path: String) throws(ReadError) -> [UInt8] {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw .unreadable(path: path, errno: errno) }
        defer { close(descriptor) }
        var contents: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while contents.count <= maxSize {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw .unreadable(path: path, errno: errno)
            }
            if count == 0 { return contents }
            contents.append(contentsOf: chunk[0..<count])
        }
        throw .tooLarge(path: path)
    }
}
