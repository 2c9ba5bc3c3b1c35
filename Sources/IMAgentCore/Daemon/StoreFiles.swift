#if canImport(Glibc)
import Glibc
#endif

/// Makes the store private whatever the umask: its directory 0700 (created
/// when missing) and the database 0600 before SQLite opens it. SQLite gives
/// the write-ahead log and shared-memory files the database file's mode, so
/// every file that holds payloads is readable by the daemon's user only;
/// the IPC socket stays the only way in for other users.
enum StoreFiles {
    static let directoryMode: mode_t = 0o700
    static let fileMode: mode_t = 0o600

    /// Returns warnings worth logging; throws what makes the store unusable.
    static func prepare(directory: String, database: String) throws(StoreFilesError) -> [String] {
        var warnings: [String] = []
        var status = stat()
        if stat(directory, &status) != 0 {
            guard errno == ENOENT else { throw StoreFilesError("cannot read \(directory): \(errnoText())") }
            guard mkdir(directory, directoryMode) == 0 || errno == EEXIST else {
                throw StoreFilesError("cannot create the store directory \(directory): \(errnoText()); create it (mode 0700, owned by the daemon's user) or set [store] directory")
            }
            // mkdir's mode is filtered by the umask; this sets exactly 0700.
            guard chmod(directory, directoryMode) == 0 else { throw StoreFilesError("cannot chmod \(directory): \(errnoText())") }
        } else if status.st_mode & 0o077 != 0, status.st_uid == geteuid() {
            // Ours and open to others: tighten it; the store holds every user's payloads.
            if chmod(directory, directoryMode) == 0 {
                warnings.append("the store directory \(directory) was mode \(String(status.st_mode & 0o777, radix: 8)); set it to 0700")
            }
        } else if status.st_mode & 0o077 != 0 {
            warnings.append("the store directory \(directory) is mode \(String(status.st_mode & 0o777, radix: 8)) and not owned by the daemon's user; other users may see the store's file names")
        }
        let descriptor = open(database, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, fileMode)
        guard descriptor >= 0 else { throw StoreFilesError("cannot create \(database): \(errnoText())") }
        defer { close(descriptor) }
        guard fchmod(descriptor, fileMode) == 0 else { throw StoreFilesError("cannot chmod \(database): \(errnoText())") }
        // Files an older version left readable to others.
        for suffix in ["-wal", "-shm", "-journal"] where stat(database + suffix, &status) == 0 && status.st_mode & 0o077 != 0 {
            _ = chmod(database + suffix, fileMode)
        }
        return warnings
    }

    private static func errnoText() -> String { String(cString: strerror(errno)) }
}

struct StoreFilesError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
