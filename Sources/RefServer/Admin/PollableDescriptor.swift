#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Whether NIO can watch a descriptor with epoll: pipes, sockets and
/// terminals can; regular files and other character devices (`/dev/null`,
/// which is what a service or CI gives as stdin) cannot, and NIO traps
/// rather than throws when asked to register one.
enum PollableDescriptor {
    static func isPollable(_ descriptor: CInt) -> Bool {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { return false }
        switch status.st_mode & S_IFMT {
        case S_IFIFO, S_IFSOCK: return true
        case S_IFCHR: return isatty(descriptor) == 1
        default: return false
        }
    }
}
