import Logging
import NIOConcurrencyHelpers

/// The daemon's logging: one process-wide level that a reload can change
/// while loggers already handed out keep working.
enum DaemonLogging {
    private static let level = NIOLockedValueBox(Logger.Level.info)

    /// Installs the handler and returns the daemon's root logger.
    static func bootstrap(level initial: Logger.Level) -> Logger {
        level.withLockedValue { $0 = initial }
        LoggingSystem.bootstrap { label in
            SharedLevelHandler(inner: StreamLogHandler.standardError(label: label), level: level)
        }
        return Logger(label: "imagentd")
    }

    static func setLevel(_ configured: DaemonConfiguration.LogLevel) {
        level.withLockedValue { $0 = Logger.Level(rawValue: configured.rawValue) ?? .info }
    }
}

/// Forwards to `inner`, filtering by the shared level instead of a per-copy one.
private struct SharedLevelHandler: LogHandler {
    var inner: any LogHandler
    let level: NIOLockedValueBox<Logger.Level>

    var logLevel: Logger.Level {
        get { level.withLockedValue { $0 } }
        set { level.withLockedValue { $0 = newValue } }
    }

    var metadata: Logger.Metadata {
        get { inner.metadata }
        set { inner.metadata = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { inner[metadataKey: key] }
        set { inner[metadataKey: key] = newValue }
    }

    /// `Logger` has already compared the event with `logLevel`.
    func log(event: LogEvent) {
        inner.log(event: event)
    }
}
