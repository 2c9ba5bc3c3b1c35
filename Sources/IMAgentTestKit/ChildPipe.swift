import CChildProcess
#if canImport(Glibc)
import Glibc
#endif

/// A pipe to or from a child: give the child one end (`ChildProcess.Stream.descriptor`),
/// then `closeChildEnd` so that end-of-file arrives once the child closes its copy.
/// Both descriptors are close-on-exec; whatever is still open closes when this goes away.
public final class ChildPipe: @unchecked Sendable {
    public private(set) var readEnd: Int32
    public private(set) var writeEnd: Int32

    public init() throws(ChildProcessError) {
        var ends: [Int32] = [-1, -1]
        guard imagent_pipe_cloexec(&ends) == 0 else { throw ChildProcessError("pipe: \(ChildProcess.errorText(errno))") }
        (readEnd, writeEnd) = (ends[0], ends[1])
    }

    deinit {
        closeRead()
        closeWrite()
    }

    public func closeRead() {
        if readEnd >= 0 { close(readEnd) }
        readEnd = -1
    }

    public func closeWrite() {
        if writeEnd >= 0 { close(writeEnd) }
        writeEnd = -1
    }

    /// Writes all of `text` to the write end.
    public func write(_ text: String) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty, writeEnd >= 0 {
            let written = bytes.withUnsafeBytes { Glibc.write(writeEnd, $0.baseAddress, $0.count) }
            if written < 0, errno == EINTR { continue }
            guard written > 0 else { return }
            bytes = bytes.dropFirst(written)
        }
    }

    /// Reads the read end until end-of-file (close the write end first when the child holds the other copy).
    public func readToEnd() -> String {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while readEnd >= 0 {
            let count = chunk.withUnsafeMutableBytes { read(readEnd, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            bytes += chunk[..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
