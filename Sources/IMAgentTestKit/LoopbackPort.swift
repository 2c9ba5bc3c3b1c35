#if canImport(Glibc)
import Glibc
#endif

/// A TCP port on 127.0.0.1, bound but not listening, so that connections to it are refused
/// until `release()`; then a program can listen there (a server that is "down" for now).
public final class PortReservation: @unchecked Sendable {
    public let port: Int
    private var descriptor: CInt

    public init() throws(ChildProcessError) {
        // Close-on-exec: a child spawned meanwhile must not keep the port bound after `release()`.
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        self.descriptor = descriptor
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, length) == 0 && getsockname(descriptor, $0, &length) == 0
            }
        }
        guard descriptor >= 0, bound else { throw ChildProcessError("cannot reserve a port on 127.0.0.1: \(ChildProcess.errorText(errno))") }
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    public func release() {
        if descriptor >= 0 { close(descriptor) }
        descriptor = -1
    }

    deinit { release() }
}

/// A port on 127.0.0.1 that was free a moment ago (reserved, then released) for a program to listen on.
public func freeLoopbackPort() throws(ChildProcessError) -> Int {
    let reservation = try PortReservation()
    reservation.release()
    return reservation.port
}

/// Whether something accepts TCP connections on 127.0.0.1:`port` now.
public func loopbackAccepts(_ port: Int) -> Bool {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard descriptor >= 0 else { return false }
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = UInt16(port).bigEndian
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
    }
}
