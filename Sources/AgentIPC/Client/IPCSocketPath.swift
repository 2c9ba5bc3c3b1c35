#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Where a client looks for the daemon's socket (`ipc.md` section 1).
///
/// The order, first match wins:
///
/// 1. the path the program was given (`imagent --socket PATH`, `IPCClient.connect(socketPath:)`);
/// 2. `$IMAGENT_SOCKET`, when set and not empty;
/// 3. `/run/imagent/imagent.sock`, the system service's socket, when it exists;
/// 4. `$XDG_RUNTIME_DIR/imagent/imagent.sock`, a user-mode or development
///    daemon's socket, when `XDG_RUNTIME_DIR` is set and that socket exists;
/// 5. otherwise `/run/imagent/imagent.sock` again, so that the "not running"
///    error names the system socket (and says which user socket was tried).
///
/// An explicit path or `$IMAGENT_SOCKET` is used as given, existing or not:
/// someone who names a socket means that one, and a silent fallback to
/// another daemon would be a surprise.
public struct IPCSocketPath: Hashable, Sendable, CustomStringConvertible {
    /// How the path was chosen, for error messages and `--verbose` output.
    public enum Source: Hashable, Sendable {
        case explicit
        case environment
        case system
        case user
    }

    public static let systemPath = "/run/imagent/imagent.sock"
    public static let environmentVariable = "IMAGENT_SOCKET"

    public var path: String
    public var source: Source
    /// Default locations that were looked at and did not exist (only for
    /// `.system` and `.user`), so an error can say everything that was tried.
    public var alsoTried: [String]

    public init(path: String, source: Source, alsoTried: [String] = []) {
        self.path = path
        self.source = source
        self.alsoTried = alsoTried
    }

    public var description: String { path }

    /// The daemon's second socket, beside this one: `PATH.admin`.
    public var adminPath: String { Self.adminPath(for: path) }

    /// Where a daemon serving `socket` listens for root, its own user and its
    /// admin group alone (imagentd(8), SECURITY): a listen queue that no flood
    /// of other users' connections can fill. Clients try it first; whoever may
    /// not connect to it is refused at once and uses `socket`.
    public static func adminPath(for socket: String) -> String { socket + ".admin" }

    /// Resolves the path from this process's environment and file system.
    public static func resolve(explicit: String?) -> IPCSocketPath {
        resolve(explicit: explicit, environment: { name in getenv(name).map { String(cString: $0) } },
                exists: fileExists)
    }

    /// The same decision with the environment and the file system passed in,
    /// so that every branch is testable without touching either.
    public static func resolve(explicit: String?, environment: (String) -> String?,
                               exists: (String) -> Bool) -> IPCSocketPath {
        if let explicit, !explicit.isEmpty {
            return IPCSocketPath(path: explicit, source: .explicit)
        }
        if let fromEnvironment = environment(environmentVariable), !fromEnvironment.isEmpty {
            return IPCSocketPath(path: fromEnvironment, source: .environment)
        }
        if exists(systemPath) {
            return IPCSocketPath(path: systemPath, source: .system)
        }
        guard let runtimeDirectory = environment("XDG_RUNTIME_DIR"), !runtimeDirectory.isEmpty else {
            return IPCSocketPath(path: systemPath, source: .system)
        }
        let userPath = runtimeDirectory.hasSuffix("/")
            ? "\(runtimeDirectory)imagent/imagent.sock" : "\(runtimeDirectory)/imagent/imagent.sock"
        if exists(userPath) {
            return IPCSocketPath(path: userPath, source: .user)
        }
        return IPCSocketPath(path: systemPath, source: .system, alsoTried: [userPath])
    }

    /// Whether anything exists at `path`; `lstat` so that a socket file is
    /// seen even when it is not ours to open.
    private static func fileExists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }
}
