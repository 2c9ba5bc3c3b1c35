import CSystemd
import Glibc

/// Sockets passed by systemd socket activation (`imagentd.socket`), so the
/// IPC server adopts the listening socket systemd bound — with the mode and
/// group the socket unit set — instead of binding its own. The socket then
/// outlives daemon restarts and clients queue on it while the daemon starts.
enum SocketActivation {
    enum Failure: Error, Hashable, Sendable, CustomStringConvertible {
        /// `sd_listen_fds` failed (malformed `$LISTEN_FDS`, or fcntl failed).
        case listenFDs(errno: Int32)
        /// systemd passed a descriptor that is not a listening Unix stream
        /// socket: the socket unit is misconfigured (ListenDatagram=, a port…).
        case notAUnixStreamListener(fd: Int32)

        var description: String {
            switch self {
            case .listenFDs(let code):
                "socket activation: sd_listen_fds failed: \(String(cString: strerror(code)))"
            case .notAUnixStreamListener(let fd):
                "socket activation: descriptor \(fd) from systemd is not a listening Unix stream socket; imagentd.socket must use ListenStream=/path"
            }
        }
    }

    /// The listening Unix stream sockets systemd passed to this process, in
    /// the socket unit's order; empty when the daemon was not socket-activated
    /// (no `$LISTEN_FDS`, or `$LISTEN_PID` names another process).
    ///
    /// The variables are unset afterwards, so processes the daemon starts
    /// (a `token_command`) do not believe they were activated; the descriptors
    /// get FD_CLOEXEC for the same reason. Call once, early. Hand each
    /// descriptor to NIO with `ServerBootstrap(group:).withBoundSocket(fd)`.
    static func listeningSockets() throws(Failure) -> [Int32] {
        let count = sd_listen_fds(1)
        guard count >= 0 else { throw .listenFDs(errno: -count) }
        return try verified(Array(SD_LISTEN_FDS_START..<(SD_LISTEN_FDS_START + count)))
    }

    /// Checks that every descriptor is a listening Unix stream socket.
    static func verified(_ descriptors: [Int32]) throws(Failure) -> [Int32] {
        for fd in descriptors {
            // 1: must be listening; nil path: any address, also abstract.
            guard sd_is_socket_unix(fd, Int32(SOCK_STREAM.rawValue), 1, nil, 0) > 0 else {
                throw .notAUnixStreamListener(fd: fd)
            }
        }
        return descriptors
    }
}
