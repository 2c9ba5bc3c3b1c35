#if canImport(Glibc)
import Glibc
#endif
import AgentStore

/// What this disk takes through the store's group-commit pattern at `power`, with no store
/// around it: per batch, `batch` payloads of `size` bytes appended with one `pwrite` each to a
/// payload file and `fdatasync`, then one 4 KiB page written to a second file and `fdatasync`
/// (the WAL commit of the batch's rows). Every 16 MiB the payload file is renamed and written
/// over from its start, as the store's next segment file is its spare segment
/// (`StoreConfiguration.defaultSegmentFileBytes`, `PayloadSegments`), the new name's directory
/// entry fsynced with the next batch; the second file is written round a 4 MiB ring, as SQLite
/// reuses its WAL after a checkpoint. The files are private and removed at the end.
struct DiskProbe: Sendable {
    var size: Int
    var batch: Int
    var seconds: Double
    var directory: String

    /// Bytes of the second file's write per batch: one page, standing for the WAL frame of the batch's rows.
    static let commitRecordBytes = 4096
    /// SQLite's default `wal_autocheckpoint` of 1,000 pages.
    static let commitFileBytes = 1000 * commitRecordBytes

    func run() throws -> DiskProbeResult {
        let directoryDescriptor = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directoryDescriptor >= 0 else { throw Self.failure("cannot open the directory", directory) }
        defer { close(directoryDescriptor) }
        let base = "\(directory)/.imagent-bench-diskprobe-\(getpid())"
        var segment = 0
        var payloads = try Self.create("\(base).payloads.\(segment)")
        let commits: CInt
        do { commits = try Self.create("\(base).commits") } catch {
            close(payloads)
            unlink("\(base).payloads.\(segment)")
            throw error
        }
        defer {
            close(payloads)
            close(commits)
            unlink("\(base).payloads.\(segment)")
            unlink("\(base).commits")
        }
        let payload = [UInt8](repeating: 0x5A, count: size)
        let record = [UInt8](repeating: 0xA5, count: Self.commitRecordBytes)
        var (offset, commitOffset, batches, newEntry) = (0, 0, 0, true)
        let clock = ContinuousClock()
        let start = clock.now
        let deadline = start.advanced(by: .milliseconds(Int(seconds * 1000)))
        repeat {
            if offset >= StoreConfiguration.defaultSegmentFileBytes {
                guard rename("\(base).payloads.\(segment)", "\(base).payloads.\(segment + 1)") == 0 else {
                    throw Self.failure("cannot rename", "\(base).payloads.\(segment)")
                }
                segment += 1
                (offset, newEntry) = (0, true)
            }
            for _ in 0..<batch {
                try Self.write(payloads, payload, at: offset, "the payload file")
                offset += size
            }
            guard fdatasync(payloads) == 0 else { throw Self.failure("fdatasync of the payload file in", directory) }
            if newEntry {
                guard fsync(directoryDescriptor) == 0 else { throw Self.failure("fsync of", directory) }
                newEntry = false
            }
            try Self.write(commits, record, at: commitOffset, "the commit file")
            commitOffset = (commitOffset + Self.commitRecordBytes) % Self.commitFileBytes
            guard fdatasync(commits) == 0 else { throw Self.failure("fdatasync of the commit file in", directory) }
            batches += 1
        } while clock.now < deadline
        return DiskProbeResult(size: size, batch: batch, batches: batches, seconds: (clock.now - start).seconds)
    }

    private static func create(_ path: String) throws -> CInt {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw failure("cannot create", path) }
        return descriptor
    }

    private static func write(_ descriptor: CInt, _ bytes: [UInt8], at offset: Int, _ name: String) throws {
        var done = 0
        while done < bytes.count {
            let result = bytes.withUnsafeBytes { pwrite(descriptor, $0.baseAddress! + done, bytes.count - done, off_t(offset + done)) }
            if result < 0 {
                if errno == EINTR { continue }
                throw failure("pwrite to", name)
            }
            done += result
        }
    }

    private static func failure(_ what: String, _ path: String) -> BenchError {
        BenchError("disk probe: \(what) \(path): \(String(cString: strerror(errno)))")
    }
}

/// A probe's figures: `batches` batches of `batch` payloads of `size` bytes in `seconds`.
struct DiskProbeResult: Hashable, Sendable {
    var size: Int
    var batch: Int
    var batches: Int
    var seconds: Double

    var payloadsPerSecond: Double { Double(batches * batch) / seconds }
    var payloadBytesPerSecond: Double { payloadsPerSecond * Double(size) }
    /// Two per batch: the payload file's and the commit file's.
    var fdatasyncsPerSecond: Double { Double(2 * batches) / seconds }

    /// `rate` (payload bytes per second, say imagentd's) ÷ the probe's.
    func ratio(ofPayloadBytesPerSecond rate: Double) -> Double { rate / payloadBytesPerSecond }

    /// "12 × 64 KiB per batch: 85.3 MB/s of payload, 1,302 payloads/s, 217 fdatasyncs/s".
    var summary: String {
        "\(batch) × \(sizeLabel(size)) per batch: \(format(payloadBytesPerSecond / 1e6, decimals: 1)) MB/s of payload, "
            + "\(grouped(Int(payloadsPerSecond))) payloads/s, \(grouped(Int(fdatasyncsPerSecond))) fdatasyncs/s"
    }
}

/// `imagent-bench diskprobe`.
func runDiskProbe(_ probe: DiskProbe) -> Int32 {
    print("disk probe in \(probe.directory), \(format(probe.seconds, decimals: 1)) s: per batch, \(probe.batch) pwrite of "
          + "\(sizeLabel(probe.size)) to a payload file and fdatasync, then \(DiskProbe.commitRecordBytes) B to a commit file and fdatasync")
    do {
        let result = try probe.run()
        print("\(grouped(result.batches)) batches in \(format(result.seconds, decimals: 2)) s; " + result.summary)
        return 0
    } catch {
        print("imagent-bench diskprobe: \(error)")
        return 1
    }
}
