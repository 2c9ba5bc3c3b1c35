#if canImport(Glibc)
import Glibc
#endif

/// Calls `body` with a `sockaddr_un` for `path`; nil when the path is too long for one.
public func withUnixSocketAddress<T>(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) throws -> T) rethrows -> T? {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return nil }
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        raw.copyBytes(from: bytes)
        raw[bytes.count] = 0
    }
    return try withUnsafePointer(to: &address) {
        try $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { try body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
}

/// A close-on-exec Unix socket of `type` (SOCK_STREAM, SOCK_DGRAM) bound to `path` (an old file there is
/// removed first), listening when `listen` is set.
public func makeUnixSocket(type: Int32, path: String, listen shouldListen: Bool = false) throws(ChildProcessError) -> Int32 {
    unlink(path)
    let descriptor = socket(AF_UNIX, type | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard descriptor >= 0 else { throw ChildProcessError("socket(AF_UNIX): \(ChildProcess.errorText(errno))") }
    guard let bound = withUnixSocketAddress(path, { bind(descriptor, $0, $1) }) else {
        close(descriptor)
        throw ChildProcessError("\(path) is too long for a socket path")
    }
    guard bound == 0, !shouldListen || listen(descriptor, 16) == 0 else {
        let error = errno
        close(descriptor)
        throw ChildProcessError("cannot bind or listen on \(path): \(ChildProcess.errorText(error))")
    }
    return descriptor
}

/// A connected stream socket to `path`, or nil when nobody accepts there now.
public func connectUnixSocket(_ path: String) -> Int32? {
    let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard descriptor >= 0 else { return nil }
    guard withUnixSocketAddress(path, { connect(descriptor, $0, $1) }) == 0 else {
        close(descriptor)
        return nil
    }
    return descriptor
}

/// Whether a Unix stream socket at `path` accepts a connection now.
public func unixSocketAccepts(_ path: String) -> Bool {
    guard let descriptor = connectUnixSocket(path) else { return false }
    close(descriptor)
    return true
}

/// Writes `line` and a newline to the stream socket at `path` and returns the reply line (without its newline),
/// as the reference server's admin socket answers.
public func unixSocketRequest(_ path: String, _ line: String) throws(ChildProcessError) -> String {
    guard let descriptor = connectUnixSocket(path) else {
        throw ChildProcessError("cannot connect to \(path): \(ChildProcess.errorText(errno))")
    }
    defer { close(descriptor) }
    var bytes = Array((line + "\n").utf8)[...]
    while !bytes.isEmpty {
        let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        if written < 0, errno == EINTR { continue }
        guard written > 0 else { throw ChildProcessError("cannot write to \(path): \(ChildProcess.errorText(errno))") }
        bytes = bytes.dropFirst(written)
    }
    var reply: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 512)
    while !reply.contains(UInt8(ascii: "\n")) {
        let count = read(descriptor, &buffer, buffer.count)
        if count < 0, errno == EINTR { continue }
        guard count > 0 else { break }
        reply += buffer[..<count]
    }
    return String(decoding: reply, as: UTF8.self).split(separator: "\n").first.map(String.init) ?? ""
}
