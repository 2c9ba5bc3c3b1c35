import Logging
import Synchronization

/// The daemon's log level, shared by every logger and changeable while it
/// runs. `LoggingSystem.bootstrap` can run only once per process, so a reload
/// that changes `[log] level` sets this instead of installing new handlers.
final class LiveLogLevel: Sendable {
    private let index: Atomic<Int>

    init(_ level: Logger.Level) {
        index = Atomic(Self.levels.firstIndex(of: level)!)
    }

    var level: Logger.Level {
        get { Self.levels[index.load(ordering: .relaxed)] }
        set { index.store(Self.levels.firstIndex(of: newValue)!, ordering: .relaxed) }
    }

    private static let levels = Logger.Level.allCases
}

/// One handler's level: the daemon's live level, unless this one logger was
/// given a level of its own (`logger.logLevel = …`).
struct HandlerLevel: Sendable {
    let shared: LiveLogLevel
    var own: Logger.Level?

    var current: Logger.Level { own ?? shared.level }
}

/// What the journal and stderr handlers share: the live level and the
/// handler's own metadata.
protocol LiveLevelLogHandler: LogHandler {
    var level: HandlerLevel { get set }
}

extension LiveLevelLogHandler {
    var logLevel: Logger.Level {
        get { level.current }
        set { level.own = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
}

extension Logger.Level {
    /// The configuration's names are swift-log's names, by design.
    init(_ level: DaemonConfiguration.LogLevel) {
        switch level {
        case .trace: self = .trace
        case .debug: self = .debug
        case .info: self = .info
        case .notice: self = .notice
        case .warning: self = .warning
        case .error: self = .error
        case .critical: self = .critical
        }
    }
}

extension Logger.Metadata {
    /// What one entry carries: the handler's metadata, then the provider's,
    /// then the call's own, each later one winning on a shared key (the order
    /// swift-log documents for handlers).
    static func merged(handler: Logger.Metadata, provider: Logger.MetadataProvider?, event: Logger.Metadata?) -> Logger.Metadata {
        var merged = handler
        if let provided = provider?.get(), !provided.isEmpty {
            merged.merge(provided) { _, new in new }
        }
        if let event, !event.isEmpty {
            merged.merge(event) { _, new in new }
        }
        return merged
    }
}
