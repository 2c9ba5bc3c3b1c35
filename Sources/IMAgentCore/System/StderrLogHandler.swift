import Glibc
import JSONText
import Logging

/// A swift-log handler for a terminal or a plain log file: one line per
/// entry on stderr,
///
///     2025-06-01T12:00:00.123Z warning imagent.link: link lost endpoint=im.example.net:7443 reason="timed out"
///
/// UTC time, level, logger label, message, then the metadata as sorted
/// `key=value` pairs (logfmt quoting), so lines can be grepped and parsed.
struct StderrLogHandler: LiveLevelLogHandler {
    let label: String
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?
    var level: HandlerLevel
    /// Off for callers whose collector stamps each line itself (a supervisor,
    /// a test harness), so lines do not carry two times.
    private let timestamps: Bool

    init(label: String, level: LiveLogLevel, timestamps: Bool = true, metadataProvider: Logger.MetadataProvider? = nil) {
        self.label = label
        self.level = HandlerLevel(shared: level)
        self.timestamps = timestamps
        self.metadataProvider = metadataProvider
    }

    func log(event: LogEvent) {
        var metadata = Logger.Metadata.merged(handler: metadata, provider: metadataProvider, event: event.metadata)
        if let error = event.error {
            metadata["error"] = "\(error)"
        }
        let text = Self.line(
            timestamp: timestamps ? Self.utcTimestamp() : nil,
            level: event.level,
            label: label,
            message: event.message.description,
            metadata: metadata)
        Self.write(text + "\n")
    }

    /// One entry as one line, without the newline. Pure, for the tests.
    static func line(timestamp: String?, level: Logger.Level, label: String, message: String, metadata: Logger.Metadata) -> String {
        var line = timestamp.map { $0 + " " } ?? ""
        line += "\(level) \(label): \(escapingNewlines(message))"
        for (key, value) in metadata.sorted(by: { $0.key < $1.key }) {
            line += " \(key)=\(quoted("\(value)"))"
        }
        return line
    }

    /// A value as logfmt writes it: bare when it has no space, quote, `=` or
    /// control character, else quoted and escaped as a JSON string (which
    /// logfmt readers accept).
    static func quoted(_ value: String) -> String {
        let needsQuotes = value.isEmpty || value.unicodeScalars.contains { $0 == " " || $0 == "\"" || $0 == "=" || $0 == "\\" || $0.value < 0x20 }
        return needsQuotes ? JSONWriter.quoted(value) : value
    }

    /// A multi-line message would break "one line per entry".
    private static func escapingNewlines(_ text: String) -> String {
        text.contains("\n") ? text.split(separator: "\n", omittingEmptySubsequences: false).joined(separator: "\\n") : text
    }

    /// ISO 8601 in UTC with milliseconds, without Foundation.
    static func utcTimestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var parts = tm()
        var seconds = now.tv_sec
        gmtime_r(&seconds, &parts)
        func pad(_ value: Int32, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))"
            + "T\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2))"
            + ".\(pad(Int32(now.tv_nsec / 1_000_000), 3))Z"
    }

    /// One write(2) per line where the kernel allows it, so lines from
    /// several threads do not interleave mid-line.
    private static func write(_ text: String) {
        var text = text
        text.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = Glibc.write(STDERR_FILENO, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return
                }
                offset += written
            }
        }
    }
}
