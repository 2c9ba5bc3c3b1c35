#if canImport(Glibc)
import Glibc
#endif

/// A TCP port on 127.0.0.1, bound but not listening, so that connections to it are refused.
final class PortReservation {
    let port: Int
    private var descriptor: CInt

    init() throws {
        // Close-on-exec: a daemon spawned meanwhile must not keep the port bound after `release()`.
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
        guard descriptor >= 0, bound else { throw BenchError("cannot reserve a port") }
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    func release() {
        if descriptor >= 0 { close(descriptor) }
        descriptor = -1
    }

    deinit { release() }
}
