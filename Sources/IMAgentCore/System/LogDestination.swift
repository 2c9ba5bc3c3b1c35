import Glibc
import Logging

/// Where the daemon's log goes: the journal, with structured fields, when
/// systemd connected stderr to it; plain lines on stderr otherwise.
enum LogDestination: Hashable, Sendable {
    case journal
    case stderr

    /// Decides from `$JOURNAL_STREAM` and stderr's identity, as systemd.exec(5)
    /// documents: the variable holds the device and inode (`DEV:INODE`, decimal)
    /// of the stream systemd connected, and only when stderr is still that very
    /// file — not redirected by a wrapper or a shell — is the journal the right
    /// place to write to directly.
    static func detect(journalStream: String?, stderrIdentity: (device: UInt64, inode: UInt64)?) -> LogDestination {
        guard let journalStream, let stderrIdentity else { return .stderr }
        let parts = journalStream.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return .stderr }
        return (device, inode) == stderrIdentity ? .journal : .stderr
    }

    /// The destination for this process as it runs now.
    static func current() -> LogDestination {
        detect(journalStream: getenv("JOURNAL_STREAM").map { String(cString: $0) }, stderrIdentity: stderrIdentity())
    }

    /// stderr's device and inode, or nil when stderr is closed.
    static func stderrIdentity() -> (device: UInt64, inode: UInt64)? {
        var status = stat()
        guard fstat(STDERR_FILENO, &status) == 0 else { return nil }
        return (UInt64(status.st_dev), UInt64(status.st_ino))
    }
}

/// Installs the daemon's log handlers, once, at start-up.
enum DaemonLogging {
    /// Bootstraps swift-log with the handler for `destination` and returns
    /// the level every logger follows; a reload sets `level` on it.
    static func bootstrap(level: DaemonConfiguration.LogLevel, destination: LogDestination = .current()) -> LiveLogLevel {
        let shared = LiveLogLevel(Logger.Level(level))
        // Under systemd without the journal (StandardError=file:…) whoever
        // collects the lines does not stamp them, so timestamps stay on.
        LoggingSystem.bootstrap { label in
            switch destination {
            case .journal: JournalLogHandler(label: label, level: shared)
            case .stderr: StderrLogHandler(label: label, level: shared)
            }
        }
        return shared
    }
}
