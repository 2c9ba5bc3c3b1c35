#if canImport(Glibc)
import Glibc
#endif
import IMAgentTestKit

/// The write counters of `/proc/PID/io`, in bytes, since the process started.
///
/// `write_bytes` is what the process caused to be sent to the block layer, counted by the
/// kernel when the process dirties a page of the page cache (or submits direct I/O), not when
/// writeback reaches the disk: so a sample at the end of a run already holds the run's
/// buffered writes, fsynced or not. A page dirtied again before writeback counts once; a
/// partial page counts whole (4 KiB); the journal and metadata writes the filesystem makes
/// in its own threads count for no process. `cancelled_write_bytes` is what the process
/// later saved by truncating or removing dirty pages before writeback; `write_bytes` does not
/// have it subtracted.
struct ProcessIO: Hashable, Sendable {
    var writeBytes: Int
    var cancelledWriteBytes: Int

    init(writeBytes: Int, cancelledWriteBytes: Int) {
        (self.writeBytes, self.cancelledWriteBytes) = (writeBytes, cancelledWriteBytes)
    }

    /// From the text of `/proc/PID/io` (`name: value` lines); nil if `write_bytes` is not there.
    init?(_ text: String) {
        var fields: [Substring: Int] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 1)
            guard parts.count == 2, let value = Int(parts[1].drop { $0 == " " || $0 == "\t" }) else { continue }
            fields[parts[0]] = value
        }
        guard let written = fields["write_bytes"] else { return nil }
        self.init(writeBytes: written, cancelledWriteBytes: fields["cancelled_write_bytes"] ?? 0)
    }

    /// The process's counters now; nil once it is gone or not readable (another uid, no task I/O accounting).
    static func of(_ pid: pid_t) -> ProcessIO? { readFile("/proc/\(pid)/io").flatMap(ProcessIO.init) }
}
