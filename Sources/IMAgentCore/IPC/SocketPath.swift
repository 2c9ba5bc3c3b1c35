#if canImport(Glibc)
import Glibc
#endif

/// Prepares the path the IPC socket will be bound to.
enum SocketPath {
    enum Problem: Error, CustomStringConvertible {
        case inUse(String)
        case tooLong(String)
        case cannotCreateDirectory(String, errno: Int32)
        case cannotRemove(String, errno: Int32)

        var description: String {
            switch self {
            case .inUse(let path):
                "another imagentd is already serving \(path); stop it first (systemctl stop imagentd) or choose another [ipc] socket"
            case .tooLong(let path):
                "socket path \(path) is longer than the 107 bytes a Unix socket address holds; choose a shorter [ipc] socket"
            case .cannotCreateDirectory(let path, let code):
                "cannot create \(path): \(String(cString: strerror(code)))"
            case .cannotRemove(let path, let code):
                "cannot remove the stale socket \(path): \(String(cString: strerror(code)))"
            }
        }
    }

    /// Creates the parent directory and removes a stale socket file: one that
    /// exists but where nobody accepts connections (a daemon that crashed).
    /// A live socket is left alone and reported, so two daemons never fight.
    static func prepare(_ path: String) throws(Problem) {
        guard path.utf8.count < 108 else { throw .tooLong(path) }
        if let slash = path.lastIndex(of: "/"), slash != path.startIndex {
            try makeDirectories(String(path[..<slash]))
        }
        var status = stat()
        guard lstat(path, &status) == 0 else { return }
        guard (status.st_mode & S_IFMT) == S_IFSOCK else { return } // bind will fail with a clear EADDRINUSE
        if isAccepting(path) { throw .inUse(path) }
        guard unlink(path) == 0 || errno == ENOENT else { throw .cannotRemove(path, errno: errno) }
    }

    private static func makeDirectories(_ directory: String) throws(Problem) {
        var prefix = ""
        for component in directory.split(separator: "/") {
            prefix += "/" + component
            if mkdir(prefix, 0o755) != 0 && errno != EEXIST {
                throw .cannotCreateDirectory(prefix, errno: errno)
            }
        }
    }

    /// Whether something accepts connections on the socket at `path`.
    private static func isAccepting(_ path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: path.utf8.prefix(raw.count - 1))
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        return connected == 0
    }

    /// The admin socket's permissions: the daemon's user alone (root passes
    /// anyway), and the admin group when the daemon may give the file to it
    /// (it runs as root or is a member). Never the main socket's group.
    static func restrictToAdmins(_ path: String, adminGroupID: gid_t?) -> String? {
        if chmod(path, 0o600) != 0 { return "cannot set mode of \(path): \(String(cString: strerror(errno)))" }
        guard let adminGroupID else { return nil }
        guard chown(path, uid_t.max, adminGroupID) == 0 else {
            return "cannot give \(path) to the admin group (\(String(cString: strerror(errno)))); its members connect through the main socket "
                + "until imagentd runs with that group among its own (SupplementaryGroups= in its unit)"
        }
        if chmod(path, 0o660) != 0 { return "cannot set mode of \(path): \(String(cString: strerror(errno)))" }
        return nil
    }

    /// Applies the configured mode and group after bind.
    static func setPermissions(_ path: String, mode: UInt32, group: String) -> String? {
        if !group.isEmpty {
            guard let gid = AdminPolicy.groupID(named: group) else {
                return "group \(group) does not exist; the socket keeps the daemon's group (create it or change [ipc] group)"
            }
            if chown(path, uid_t.max, gid) != 0 { return "cannot give \(path) to group \(group): \(String(cString: strerror(errno)))" }
        }
        if chmod(path, mode_t(mode)) != 0 { return "cannot set mode of \(path): \(String(cString: strerror(errno)))" }
        return nil
    }
}
