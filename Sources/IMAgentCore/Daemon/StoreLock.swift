#if canImport(Glibc)
import Glibc
#endif

/// An exclusive advisory lock (flock) on the store directory, held by a
/// running daemon for its lifetime and by `imagentd --check-store` while it
/// checks: a second daemon on the same store, or a check while the daemon
/// writes, is refused instead of racing the first. The kernel drops the lock
/// when the process ends, however it ends.
final class StoreLock {
    private var descriptor: CInt

    enum Failure: Error, CustomStringConvertible {
        /// Another process holds the lock.
        case inUse(directory: String)
        /// The directory is not there.
        case missing(directory: String)
        case failed(String)

        var description: String {
            switch self {
            case .inUse(let directory): "the store \(directory) is in use by another process (imagentd, or imagentd --check-store)"
            case .missing(let directory): "there is no store directory \(directory)"
            case .failed(let text): text
            }
        }
    }

    private init(descriptor: CInt) {
        self.descriptor = descriptor
    }

    static func acquire(directory: String) throws(Failure) -> StoreLock {
        let descriptor = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else {
            if errno == ENOENT { throw .missing(directory: directory) }
            throw .failed("cannot open the store directory \(directory): \(String(cString: strerror(errno)))")
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let code = errno
            close(descriptor)
            if code == EWOULDBLOCK { throw .inUse(directory: directory) }
            throw .failed("cannot lock the store directory \(directory): \(String(cString: strerror(code)))")
        }
        return StoreLock(descriptor: descriptor)
    }

    func release() {
        guard descriptor >= 0 else { return }
        close(descriptor)
        descriptor = -1
    }

    deinit { release() }
}
