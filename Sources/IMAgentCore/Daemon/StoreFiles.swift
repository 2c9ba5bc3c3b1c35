#if canImport(Glibc)
import Glibc
#endif

/// Makes the store private whatever the umask, and refuses one that others
/// could have redirected. The directory must be the daemon's user's and
/// writable by it alone; it is created 0700 when missing and tightened to
/// 0700 when others may only read it. Every store file is opened with
/// O_NOFOLLOW relative to the directory and changed through its descriptor,
/// so a symbolic link put in place of one is refused, never followed: the
/// database is made 0600 before SQLite opens it, and a write-ahead log,
/// shared-memory or rollback file left readable to others is made 0600 too.
/// SQLite gives the files it creates the database's mode, so every file that
/// holds payloads is readable by the daemon's user only; the IPC socket stays
/// the only way in for other users.
enum StoreFiles {
    static let directoryMode: mode_t = 0o700
    static let fileMode: mode_t = 0o600
    /// The files SQLite keeps beside the database.
    static let companionSuffixes = ["-wal", "-shm", "-journal"]

    /// Returns warnings worth logging; throws what makes the store unusable.
    /// `database` is a file directly in `directory`.
    static func prepare(directory: String, database: String) throws(StoreFilesError) -> [String] {
        var warnings: [String] = []
        let (descriptor, created) = try openDirectory(directory)
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw .system("cannot read \(directory): \(errnoText())") }
        let euid = geteuid()
        guard status.st_uid == euid else {
            throw .setup("the store directory \(directory) is owned by \(userName(status.st_uid)), not by the daemon's user, "
                + "\(userName(euid)): files another user can put there could redirect the store; "
                + "give it to the daemon's user (chown) or set [store] directory to a directory of the daemon's user")
        }
        let mode = status.st_mode & 0o777
        guard mode & 0o022 == 0 else {
            let writers = [mode & 0o020 != 0 ? "its group" : nil, mode & 0o002 != 0 ? "other users" : nil].compactMap { $0 }
            throw .setup("the store directory \(directory) is mode \(octal(mode)), writable by \(writers.joined(separator: " and ")): "
                + "files they put there could redirect the store; check its files, then make it private (chmod 0700 \(directory))")
        }
        if created || mode != directoryMode {
            // mkdir's mode is filtered by the umask; this sets exactly 0700.
            guard fchmod(descriptor, directoryMode) == 0 else { throw .system("cannot chmod \(directory): \(errnoText())") }
            // Ours and readable by others: tightened; the store holds every user's payloads.
            if !created { warnings.append("the store directory \(directory) was mode \(octal(mode)); set it to 0700") }
        }

        let name = String(database.split(separator: "/").last ?? Substring(database))
        let file = try openFile(name, in: descriptor, path: database, flags: O_RDWR | O_CREAT)
        defer { if let file { close(file) } }
        guard let file, fchmod(file, fileMode) == 0 else { throw .system("cannot chmod \(database): \(errnoText())") }
        for suffix in companionSuffixes {
            // Files an older version left readable to others.
            guard let companion = try openFile(name + suffix, in: descriptor, path: database + suffix, flags: O_RDONLY) else { continue }
            defer { close(companion) }
            guard fstat(companion, &status) == 0 else { throw .system("cannot read \(database + suffix): \(errnoText())") }
            if status.st_mode & 0o077 != 0, fchmod(companion, fileMode) != 0 {
                throw .system("cannot chmod \(database + suffix): \(errnoText())")
            }
        }
        return warnings
    }

    /// The directory, created when missing; a symbolic link to a directory is
    /// followed (systemd's DynamicUser= state directories are such links).
    private static func openDirectory(_ directory: String) throws(StoreFilesError) -> (CInt, created: Bool) {
        var created = false
        if mkdir(directory, directoryMode) == 0 {
            created = true
        } else if errno != EEXIST {
            throw .system("cannot create the store directory \(directory): \(errnoText()); "
                + "create it (mode 0700, owned by the daemon's user) or set [store] directory")
        }
        let descriptor = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else {
            if errno == ENOTDIR { throw .setup("the store directory \(directory) is not a directory; set [store] directory to one") }
            throw .system("cannot open the store directory \(directory): \(errnoText())")
        }
        return (descriptor, created)
    }

    /// Opens `name` in the directory without following a link; nil when it
    /// does not exist and `flags` does not create it.
    private static func openFile(_ name: String, in directory: CInt, path: String, flags: CInt) throws(StoreFilesError) -> CInt? {
        // O_NONBLOCK: a FIFO in place of a store file must not hang the start; it is refused below.
        let descriptor = openat(directory, name, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, fileMode)
        if descriptor < 0 {
            switch errno {
            case ENOENT where flags & O_CREAT == 0: return nil
            case ELOOP:
                throw .setup("\(path) is a symbolic link; the store's files must be the daemon's own: "
                    + "imagentd does not follow it; remove the link (the file it points to was not touched)")
            default: throw .system("cannot open \(path): \(errnoText())")
            }
        }
        var status = stat()
        guard fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
            close(descriptor)
            throw .setup("\(path) is not a regular file; move it out of the store directory")
        }
        return descriptor
    }

    private static func octal(_ mode: mode_t) -> String {
        let digits = String(mode, radix: 8)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }

    private static func userName(_ uid: uid_t) -> String {
        guard let entry = getpwuid(uid), let name = entry.pointee.pw_name else { return "uid \(uid)" }
        return "\(String(cString: name)) (uid \(uid))"
    }

    private static func errnoText() -> String { String(cString: strerror(errno)) }
}

/// Why the store cannot be used. `isSetup`: the directory or one of its files
/// is not as the daemon needs it (owner, mode, a link), which an operator
/// fixes and a restart cannot; otherwise a system call failed.
struct StoreFilesError: Error, CustomStringConvertible {
    var description: String
    var isSetup: Bool

    static func setup(_ description: String) -> StoreFilesError { StoreFilesError(description: description, isSetup: true) }
    static func system(_ description: String) -> StoreFilesError { StoreFilesError(description: description, isSetup: false) }
}
