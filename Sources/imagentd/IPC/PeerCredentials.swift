#if canImport(Glibc)
import Glibc
#endif
import NIOCore

/// Who is on the other end of a Unix socket, as the kernel says (SO_PEERCRED).
/// Nothing a client says about itself is trusted.
struct PeerCredentials: Hashable, Sendable, CustomStringConvertible {
    var pid: Int32
    var uid: UInt32
    var gid: UInt32

    var description: String { "pid \(pid) uid \(uid) gid \(gid)" }

    /// Reads the credentials of a connected Unix-domain channel.
    static func of(_ channel: Channel) -> EventLoopFuture<PeerCredentials> {
        guard let provider = channel as? SocketOptionProvider else {
            return channel.eventLoop.makeFailedFuture(ChannelError.operationUnsupported)
        }
        return provider.unsafeGetSocketOption(level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED))
            .map { (credentials: KernelCredentials) in PeerCredentials(pid: credentials.pid, uid: credentials.uid, gid: credentials.gid) }
    }
}

/// `struct ucred` from <sys/socket.h>, which Glibc's Swift module hides
/// behind _GNU_SOURCE: same fields, same layout.
private struct KernelCredentials: Sendable {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}
