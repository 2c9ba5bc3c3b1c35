import CSystemd
import Glibc
import Logging

/// A swift-log handler that writes structured entries to the systemd journal
/// with `sd_journal_sendv(3)`, so `journalctl -u imagentd IMAGENT_ENDPOINT=…`
/// can filter on any metadata key and `-p warning` on the level.
///
/// Each entry has MESSAGE, PRIORITY (syslog numbering), SYSLOG_IDENTIFIER,
/// CODE_FILE, CODE_LINE, CODE_FUNC, IMAGENT_LOGGER (the logger's label), and
/// one field per metadata key, named by `journalFieldName(_:)`.
struct JournalLogHandler: LiveLevelLogHandler {
    static let syslogIdentifier = "imagentd"

    let label: String
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?
    var level: HandlerLevel

    init(label: String, level: LiveLogLevel, metadataProvider: Logger.MetadataProvider? = nil) {
        self.label = label
        self.level = HandlerLevel(shared: level)
        self.metadataProvider = metadataProvider
    }

    func log(event: LogEvent) {
        let fields = Self.fields(
            level: event.level,
            message: event.message.description,
            error: event.error.map { "\($0)" },
            metadata: .merged(handler: metadata, provider: metadataProvider, event: event.metadata),
            label: label,
            file: event.file,
            function: event.function,
            line: event.line)
        Self.send(fields)
    }

    /// The journal fields of one entry, each `NAME=value`. Pure, so the
    /// mapping is tested without a journal.
    static func fields(
        level: Logger.Level,
        message: String,
        error: String? = nil,
        metadata: Logger.Metadata,
        label: String,
        file: String,
        function: String,
        line: UInt
    ) -> [String] {
        var fields = [
            "MESSAGE=\(message)",
            "PRIORITY=\(priority(level))",
            "SYSLOG_IDENTIFIER=\(syslogIdentifier)",
            "CODE_FILE=\(file)",
            "CODE_LINE=\(line)",
            "CODE_FUNC=\(function)",
            "IMAGENT_LOGGER=\(label)",
        ]
        if let error {
            fields.append("IMAGENT_ERROR=\(error)")
        }
        // Sorted, so an entry's fields come in the same order every time.
        for (key, value) in metadata.sorted(by: { $0.key < $1.key }) {
            fields.append("\(journalFieldName(key))=\(value)")
        }
        return fields
    }

    /// syslog(3) priorities, which is what the journal's PRIORITY means. swift-log
    /// has no emergency or alert; trace has no syslog level below debug.
    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }

    /// A metadata key as a journal field name: `IMAGENT_` and the key upper-cased,
    /// every character other than A–Z, 0–9 and `_` turned into `_`, at most 64
    /// bytes. The journal accepts only such names, and the prefix keeps keys
    /// from posing as the journal's own fields (MESSAGE, PRIORITY, _PID…).
    static func journalFieldName(_ key: String) -> String {
        var name = ""
        for scalar in key.unicodeScalars {
            switch scalar {
            case "a"..."z": name.unicodeScalars.append(Unicode.Scalar(scalar.value - 32)!)
            case "A"..."Z", "0"..."9", "_": name.unicodeScalars.append(scalar)
            default: name.append("_")
            }
        }
        if !name.hasPrefix("IMAGENT_") {
            name = "IMAGENT_" + name
        }
        return String(name.utf8.prefix(64))!
    }

    /// One `sd_journal_sendv` call per entry: the fields are copied into one
    /// buffer and pointed at by an iovec each. Values may hold newlines; the
    /// journal's native protocol carries them as they are.
    private static func send(_ fields: [String]) {
        let total = fields.reduce(0) { $0 + $1.utf8.count }
        let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: max(total, 1), alignment: 1)
        defer { storage.deallocate() }
        var vectors: [iovec] = []
        vectors.reserveCapacity(fields.count)
        var offset = 0
        for field in fields {
            let count = field.utf8.count
            let start = storage.baseAddress! + offset
            UnsafeMutableRawBufferPointer(start: start, count: count).copyBytes(from: field.utf8)
            vectors.append(iovec(iov_base: start, iov_len: count))
            offset += count
        }
        // A journal that cannot be reached is not worth failing over: there
        // is nowhere better to report it.
        vectors.withUnsafeBufferPointer { _ = sd_journal_sendv($0.baseAddress, Int32($0.count)) }
    }
}
