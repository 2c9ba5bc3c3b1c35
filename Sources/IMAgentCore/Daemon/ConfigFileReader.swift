#if canImport(Glibc)
import Glibc
#endif

/// Reads a configuration file with libc (the daemon stays off Foundation).
enum ConfigFileReader {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    static func read(_ path: String) throws(Failure) -> String {
        guard let file = fopen(path, "r") else {
            let reason = String(cString: strerror(errno))
            throw Failure(description: "\(path): cannot read the configuration file: \(reason)")
        }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while true {
            let count = fread(&chunk, 1, chunk.count, file)
            if count > 0 { bytes.append(contentsOf: chunk[0..<count]) }
            if count < chunk.count { break }
            // A configuration file has no business being this large: refuse instead of reading on.
            guard bytes.count <= 1 << 20 else { throw Failure(description: "\(path): larger than 1 MiB; is this the right file?") }
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw Failure(description: "\(path): not valid UTF-8 text")
        }
        return text
    }

    /// Reads and validates; the error lists every problem as `file:line: message`.
    static func load(_ path: String) throws -> DaemonConfiguration {
        try ConfigLoader.load(text: try read(path), file: path)
    }
}
