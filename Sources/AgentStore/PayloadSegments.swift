import CCRC32C
import NIOCore
#if canImport(Glibc)
import Glibc
#endif

/// Where a large payload lives: a range of one segment file, with the CRC-32C of its bytes.
struct SegmentReference: Hashable {
    var segment: Int64
    var offset: Int64
    var length: Int
    var crc: UInt32
}

/// Large payloads in append-only files beside the database (`<database>-payloads.<n>`),
/// so a message costs one `pwrite` of its bytes and one `pread` back, and its row in
/// SQLite holds only where they are. Inside the database a payload larger than a page
/// spills into a chain of overflow pages: one WAL frame per page, copied again by the
/// checkpoint, and read back page by page.
///
/// Crash safety rests on order. A row refers only to bytes written before its
/// transaction commits: with `Durability.power` the segment is fdatasynced (and a new
/// segment's directory entry fsynced) before COMMIT; with `.process` the bytes are in
/// the kernel's page cache, which outlives the process. Bytes of a transaction that
/// never committed are cut off at rollback, or stay as dead bytes in their segment
/// until it is removed. A segment is removed only when no row refers to it any more
/// and the transaction that removed the last row is durable; segments no row refers
/// to are removed at open.
///
/// New messages go to one current segment; once it reaches `segmentBytes` the next
/// batch starts another, so acknowledged messages free whole files.
///
/// Not `Sendable`: it lives on the writer thread only.
final class PayloadSegments {
    let databasePath: String
    let segmentBytes: Int
    private let syncBeforeCommit: Bool
    private let directory: CInt
    private let prefix: String

    /// Every segment file and its size in bytes.
    private(set) var sizes: [Int64: Int] = [:]
    private var current: Int64
    private var currentDescriptor: CInt
    /// Descriptors of older segments opened to read them: at most `readersKept`, so a long
    /// backlog of segments costs no more descriptors than a short one.
    private var readers: [Int64: CInt] = [:]
    private static let readersKept = 4
    /// The current segment's size when the open transaction began (its bytes beyond are cut at rollback).
    private var sizeAtBegin = 0
    /// Bytes appended in the open transaction, not yet fdatasynced.
    private var unsynced = false
    /// The current segment was created and its directory entry is not yet fsynced.
    private var unsyncedEntry = false

    /// The sum of every segment's size: what the store's size cap counts beside the database.
    var totalBytes: Int { sizes.values.reduce(0, +) }

    /// Opens the directory of `databasePath` and lists its segments. `isReferenced` tells
    /// whether a row refers to a segment; those that none does are removed.
    init(databasePath: String, durability: Durability, segmentBytes: Int,
         isReferenced: (Int64) throws -> Bool) throws {
        self.databasePath = databasePath
        self.segmentBytes = segmentBytes
        syncBeforeCommit = durability == .power
        let slash = databasePath.lastIndex(of: "/")
        let directoryPath = slash.map { databasePath[..<$0].isEmpty ? "/" : String(databasePath[..<$0]) } ?? "."
        prefix = String(slash.map { databasePath[databasePath.index(after: $0)...] } ?? Substring(databasePath)) + "-payloads."
        directory = open(directoryPath, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directory >= 0 else { throw StoreError.io("cannot open the store directory \(directoryPath): \(Self.errnoText())") }
        current = 0
        currentDescriptor = -1
        do {
            for (segment, size) in try listSegments() {
                if try isReferenced(segment) {
                    sizes[segment] = size
                } else {
                    unlinkat(directory, name(segment), 0)
                }
                current = max(current, segment)
            }
            // Appends always go to a fresh segment: the tail of an older one may hold bytes of a
            // transaction that never committed, and nothing needs to know where they end.
            try startSegment(current + 1)
        } catch {
            for descriptor in readers.values { close(descriptor) }
            if currentDescriptor >= 0 { close(currentDescriptor) }
            close(directory)
            throw error
        }
    }

    deinit {
        for descriptor in readers.values { close(descriptor) }
        close(currentDescriptor)
        close(directory)
    }

    // MARK: Transactions (called by StoreWriter)

    /// A transaction begins.
    func beginTransaction() {
        sizeAtBegin = sizes[current, default: 0]
    }

    /// Makes the transaction's bytes durable before its COMMIT refers to them (power only).
    func beforeCommit() throws(StoreError) {
        guard syncBeforeCommit else { return }
        if unsynced {
            guard fdatasync(currentDescriptor) == 0 else { throw Self.failure("fdatasync", name(current)) }
            unsynced = false
        }
        if unsyncedEntry {
            guard fsync(directory) == 0 else { throw Self.failure("fsync of the directory of", name(current)) }
            unsyncedEntry = false
        }
    }

    /// The transaction rolled back: the bytes it appended are cut off again.
    func rolledBack() {
        guard sizes[current, default: 0] > sizeAtBegin else { return }
        if ftruncate(currentDescriptor, off_t(sizeAtBegin)) == 0 { sizes[current] = sizeAtBegin }
        unsynced = false
    }

    // MARK: Payloads

    /// Appends `bytes` to the current segment; `crc`, when given, is their CRC-32C, known from
    /// their way here; `limit`, when given, is the most all segments may hold.
    func append(_ bytes: UnsafeRawBufferPointer, crc: UInt32? = nil, limit: Int?) throws(StoreError) -> SegmentReference {
        // A full segment makes way for a new one at a transaction's first append only, so one
        // transaction appends to one file (and a rollback cuts one file back).
        if sizes[current, default: 0] >= segmentBytes, sizes[current, default: 0] == sizeAtBegin {
            try startSegment(current + 1)
            sizeAtBegin = 0
        }
        let offset = sizes[current, default: 0]
        if let limit, totalBytes + bytes.count > limit {
            throw StoreError.full("payload files beside the database would pass the store's size limit of \(limit) bytes")
        }
        var written = 0
        while written < bytes.count {
            let result = pwrite(currentDescriptor, bytes.baseAddress! + written, bytes.count - written, off_t(offset + written))
            if result < 0 {
                if errno == EINTR { continue }
                let error = errno
                // Cut what was written of it, so the segment keeps only whole payloads.
                _ = ftruncate(currentDescriptor, off_t(offset))
                if error == ENOSPC || error == EDQUOT || error == EFBIG {
                    throw StoreError.full("no room on the disk for \(name(current)): \(String(cString: strerror(error)))")
                }
                throw StoreError.io("cannot write \(name(current)): \(String(cString: strerror(error)))")
            }
            written += result
        }
        sizes[current] = offset + bytes.count
        unsynced = true
        return SegmentReference(segment: current, offset: Int64(offset), length: bytes.count, crc: crc ?? Self.crc(bytes))
    }

    /// The payload at `reference`, read with one `pread` and checked against its CRC.
    func read(_ reference: SegmentReference, allocator: ByteBufferAllocator) throws(StoreError) -> ByteBuffer {
        let descriptor = try reader(reference.segment)
        var buffer = allocator.buffer(capacity: reference.length)
        var failure: Int32 = 0
        var crc: UInt32 = 0
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: reference.length) { target in
            var done = 0
            while done < reference.length {
                let result = pread(descriptor, target.baseAddress! + done, reference.length - done, off_t(reference.offset) + off_t(done))
                if result < 0, errno == EINTR { continue }
                guard result > 0 else {
                    failure = result < 0 ? errno : -1
                    return 0
                }
                done += result
            }
            crc = Self.crc(UnsafeRawBufferPointer(rebasing: target[..<reference.length]))
            return reference.length
        }
        if failure == -1 {
            throw StoreError.corrupt("\(name(reference.segment)) ends before byte \(Int(reference.offset) + reference.length) of a stored payload")
        }
        if failure != 0 { throw StoreError.io("cannot read \(name(reference.segment)): \(String(cString: strerror(failure)))") }
        guard crc == reference.crc else {
            throw StoreError.corrupt("a payload in \(name(reference.segment)) at byte \(reference.offset) fails its CRC-32C")
        }
        return buffer
    }

    // MARK: Reclaiming

    /// Segments other than the current one: the candidates for removal.
    var olderSegments: [Int64] { sizes.keys.filter { $0 != current }.sorted() }

    /// Removes a segment no row refers to any more; call only once the transaction that
    /// removed its last row is durable.
    func remove(_ segment: Int64) {
        precondition(segment != current, "the current segment is never removed")
        if let descriptor = readers.removeValue(forKey: segment) { close(descriptor) }
        unlinkat(directory, name(segment), 0)
        sizes[segment] = nil
    }

    // MARK: Files

    /// The file name of a segment, in the database's directory.
    func name(_ segment: Int64) -> String { prefix + String(segment) }

    private func startSegment(_ segment: Int64) throws(StoreError) {
        let descriptor = openat(directory, name(segment), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw Self.failure("cannot create", name(segment)) }
        // The open's mode passed through the umask; the payloads are the daemon's user's alone.
        guard fchmod(descriptor, 0o600) == 0 else {
            close(descriptor)
            throw Self.failure("cannot chmod", name(segment))
        }
        if currentDescriptor >= 0 { close(currentDescriptor) }
        current = segment
        currentDescriptor = descriptor
        sizes[segment] = 0
        unsyncedEntry = true
    }

    private func reader(_ segment: Int64) throws(StoreError) -> CInt {
        if segment == current { return currentDescriptor }
        if let descriptor = readers[segment] { return descriptor }
        // Reads go forward through the queues: the oldest segment read is the least likely to be read again.
        if readers.count >= Self.readersKept, let oldest = readers.keys.min() {
            close(readers.removeValue(forKey: oldest)!)
        }
        let descriptor = openat(directory, name(segment), O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else {
            if errno == ENOENT { throw StoreError.corrupt("\(name(segment)), which holds stored payloads, is missing") }
            throw Self.failure("cannot open", name(segment))
        }
        readers[segment] = descriptor
        return descriptor
    }

    /// Every `<prefix><n>` file in the directory with its size.
    private func listSegments() throws -> [(Int64, Int)] {
        let duplicate = dup(directory)
        guard duplicate >= 0, let stream = fdopendir(duplicate) else { throw Self.failure("cannot list the directory of", prefix) }
        defer { closedir(stream) }
        rewinddir(stream)
        var found: [(Int64, Int)] = []
        while let entry = readdir(stream) {
            let fileName = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.baseAddress!.assumingMemoryBound(to: CChar.self))
            }
            guard fileName.hasPrefix(prefix), let segment = Int64(fileName.dropFirst(prefix.count)), segment > 0 else { continue }
            var status = stat()
            guard fstatat(directory, fileName, &status, AT_SYMLINK_NOFOLLOW) == 0 else { throw Self.failure("cannot read", fileName) }
            guard status.st_mode & S_IFMT == S_IFREG else {
                throw StoreError.io("\(fileName) beside the database is not a regular file; move it out of the store directory")
            }
            found.append((segment, Int(status.st_size)))
        }
        return found
    }

    static func crc(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return 0 }
        return imagent_crc32c_update(0xFFFF_FFFF, base, bytes.count) ^ 0xFFFF_FFFF
    }

    private static func failure(_ what: String, _ file: String) -> StoreError {
        let text = "\(what) \(file): \(errnoText())"
        return errno == ENOSPC || errno == EDQUOT ? .full(text) : .io(text)
    }

    private static func errnoText() -> String { String(cString: strerror(errno)) }
}
