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

extension PeerCredentials {
    /// The peer's supplementary groups as the kernel recorded them at connect
    /// (SO_PEERGROUPS), up to 256; nil when they cannot be read. Called on the
    /// channel's loop, where the socket option is read at once.
    static func groups(of channel: Channel) -> [gid_t]? {
        guard let provider = channel as? SocketOptionProvider else { return nil }
        // On the loop the option is read at once and the callback runs before this returns.
        let groups = NIOLoopBoundBox<[gid_t]?>(nil, eventLoop: channel.eventLoop)
        provider.unsafeGetSocketOption(level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(Self.soPeerGroups))
            .whenSuccess { (list: KernelGroups) in
                // NIO zero-fills the buffer and drops the length: trailing zeros are unused slots.
                var found: [gid_t] = []
                for index in list.gids.indices where list.gids[index] != 0 { found.append(list.gids[index]) }
                groups.value = found
            }
        return groups.value
    }

    /// SO_PEERGROUPS from <asm-generic/socket.h> (Linux 4.13).
    static let soPeerGroups: CInt = 59
}

/// The buffer for SO_PEERGROUPS: room for 256 groups.
private struct KernelGroups: Sendable {
    var gids = InlineArray<256, gid_t>(repeating: 0)
}

/// `struct ucred` from <sys/socket.h>, which Glibc's Swift module hides
/// behind _GNU_SOURCE: same fields, same layout.
private struct KernelCredentials: Sendable {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}
