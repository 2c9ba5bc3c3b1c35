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
/// A full segment freed that way is kept as the *spare* (one at most), and the next segment
/// is the spare renamed and written over from its start: its blocks are allocated and its
/// pages most likely still cached, so an append costs a copy into those pages, not an
/// allocation of new ones, and removing the file costs no freeing of thousands of pages
/// (together 11 % of the daemon's CPU for a stream of 64 KiB messages). Its bytes past the
/// appends are dead, as a rolled-back transaction's are. The spare is a segment no row
/// refers to, so an open removes it like any other; the rename is made durable with the
/// directory before a commit refers to the new name, as a new file's entry is.
///
/// Not `Sendable`: it lives on the writer thread only.
final class PayloadSegments {
    let databasePath: String
    let segmentBytes: Int
    private let syncBeforeCommit: Bool
    private let directory: CInt
    private let prefix: String

    /// Every segment file and its size in bytes (a reused one's appends may end before its size).
    private(set) var sizes: [Int64: Int] = [:]
    private var current: Int64
    private var currentDescriptor: CInt
    /// Where the next append to the current segment goes.
    private var end = 0
    /// A segment no row refers to, kept open to become the next segment (see above).
    private var spare: (segment: Int64, descriptor: CInt, bytes: Int)?
    /// Descriptors of older segments opened to read them: at most `readersKept`, so a long
    /// backlog of segments costs no more descriptors than a short one.
    private var readers: [Int64: CInt] = [:]
    private static let readersKept = 4
    /// The current segment's end and size when the open transaction began (its appends beyond
    /// are undone at rollback, and what they added to the file is cut off).
    private var endAtBegin = 0
    private var sizeAtBegin = 0
    /// Bytes appended in the open transaction, not yet fdatasynced.
    private var unsynced = false
    /// Whether the last transaction begun appended anything (rolled back or not).
    private(set) var appendedInTransaction = false
    /// The current segment was created and its directory entry is not yet fsynced.
    private var unsyncedEntry = false

    /// The sum of every segment's size, the spare's included: what the store's size cap counts
    /// beside the database.
    var totalBytes: Int { sizes.values.reduce(0, +) + (spare?.bytes ?? 0) }

    /// The spare's size, if one is kept.
    var spareBytes: Int? { spare?.bytes }

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
            if let spare { close(spare.descriptor) }
            if currentDescriptor >= 0 { close(currentDescriptor) }
            close(directory)
            throw error
        }
    }

    deinit {
        for descriptor in readers.values { close(descriptor) }
        if let spare { close(spare.descriptor) }
        close(currentDescriptor)
        close(directory)
    }

    // MARK: Transactions (called by StoreWriter)

    /// A transaction begins.
    func beginTransaction() {
        endAtBegin = end
        sizeAtBegin = sizes[current, default: 0]
        appendedInTransaction = false
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

    /// The transaction rolled back: its appends are undone, and what they added to the file is cut off.
    func rolledBack() {
        end = endAtBegin
        unsynced = false
        guard sizes[current, default: 0] > sizeAtBegin else { return }
        if ftruncate(currentDescriptor, off_t(sizeAtBegin)) == 0 { sizes[current] = sizeAtBegin }
    }

    // MARK: Payloads

    /// Appends `bytes` to the current segment; `crc`, when given, is their CRC-32C, known from
    /// their way here; `limit`, when given, is the most all segments may hold.
    func append(_ bytes: UnsafeRawBufferPointer, crc: UInt32? = nil, limit: Int?) throws(StoreError) -> SegmentReference {
        // A full segment makes way for a new one at a transaction's first append only, so one
        // transaction appends to one file (and a rollback cuts one file back).
        if end >= segmentBytes, end == endAtBegin {
            try startSegment(current + 1)
            endAtBegin = 0
            sizeAtBegin = sizes[current, default: 0]
        }
        let offset = end
        let size = sizes[current, default: 0]
        let growth = max(0, offset + bytes.count - size)
        if let limit, growth > 0, totalBytes + growth > limit {
            throw StoreError.full("payload files beside the database would pass the store's size limit of \(limit) bytes")
        }
        var written = 0
        while written < bytes.count {
            let result = pwrite(currentDescriptor, bytes.baseAddress! + written, bytes.count - written, off_t(offset + written))
            if result < 0 {
                if errno == EINTR { continue }
                let error = errno
                // Cut what the write added to the file, so it keeps no partial payload past its size.
                if offset + written > size { _ = ftruncate(currentDescriptor, off_t(max(offset, size))) }
                if error == ENOSPC || error == EDQUOT || error == EFBIG {
                    throw StoreError.full("no room on the disk for \(name(current)): \(String(cString: strerror(error)))")
                }
                throw StoreError.io("cannot write \(name(current)): \(String(cString: strerror(error)))")
            }
            written += result
        }
        end = offset + bytes.count
        sizes[current] = max(size, end)
        unsynced = true
        appendedInTransaction = true
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

    /// Removes a segment no row refers to any more, or keeps it as the spare when there is
    /// none yet and it is full; call only once the transaction that removed its last row is
    /// durable.
    func remove(_ segment: Int64) {
        precondition(segment != current, "the current segment is never removed")
        if let descriptor = readers.removeValue(forKey: segment) { close(descriptor) }
        let bytes = sizes.removeValue(forKey: segment) ?? 0
        if spare == nil, bytes >= segmentBytes {
            let descriptor = openat(directory, name(segment), O_RDWR | O_NOFOLLOW | O_CLOEXEC)
            if descriptor >= 0 {
                spare = (segment, descriptor, bytes)
                return
            }
        }
        unlinkat(directory, name(segment), 0)
    }

    /// Removes the spare (the store's size limit needs its room).
    func removeSpare() {
        guard let removed = spare else { return }
        spare = nil
        close(removed.descriptor)
        unlinkat(directory, name(removed.segment), 0)
    }

    // MARK: Files

    /// The file name of a segment, in the database's directory.
    func name(_ segment: Int64) -> String { prefix + String(segment) }

    private func startSegment(_ segment: Int64) throws(StoreError) {
        end = 0
        if let reused = spare {
            spare = nil
            if renameat(directory, name(reused.segment), directory, name(segment)) == 0 {
                becomeCurrent(segment, reused.descriptor, bytes: reused.bytes)
                return
            }
            close(reused.descriptor)
            unlinkat(directory, name(reused.segment), 0)
        }
        let descriptor = openat(directory, name(segment), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw Self.failure("cannot create", name(segment)) }
        // The open's mode passed through the umask; the payloads are the daemon's user's alone.
        guard fchmod(descriptor, 0o600) == 0 else {
            close(descriptor)
            throw Self.failure("cannot chmod", name(segment))
        }
        becomeCurrent(segment, descriptor, bytes: 0)
    }

    /// `segment`, open as `descriptor` and of `bytes`, takes the appends from its start.
    private func becomeCurrent(_ segment: Int64, _ descriptor: CInt, bytes: Int) {
        if currentDescriptor >= 0 { close(currentDescriptor) }
        current = segment
        currentDescriptor = descriptor
        sizes[segment] = bytes
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
