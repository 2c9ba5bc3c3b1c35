#if canImport(Glibc)
import Glibc
#endif
import Logging
import NIOCore
import NIOPosix
import UnixSignals

/// Starts the daemon's parts in dependency order (store, link, sessions, IPC,
/// metrics endpoint), runs until SIGTERM or SIGINT, and stops them one after the
/// other in reverse (`DaemonParts`), as it does when a part cannot start: systemd hears STOPPING=1, the metrics endpoint
/// and the IPC server stop accepting, clients are told, the link closes cleanly,
/// the store finishes what is queued. A daemon still stopping after
/// `shutdownDeadline`, or signalled again, ends at once with status 1. Nothing
/// acknowledged is lost either way: ACCEPTED and ACK follow the store's commit.
///
/// The parts are not a swift-service-lifecycle `ServiceGroup`: it brings
/// swift-async-algorithms, 1.3 MB of code and about 1 MB more resident memory in an
/// idle daemon, for what `DaemonParts` does in a few lines.
enum DaemonRunner {
    /// When the process ends whatever is left, well within the units' `TimeoutStopSec=30s`.
    static let shutdownDeadline: Duration = .seconds(15)

    static func run(configuration: DaemonConfiguration, reload: (@Sendable () throws -> DaemonConfiguration)?,
                    configPath: String = "the configuration file",
                    passedSockets: [Int32], logLevel: LiveLogLevel, logger: Logger) async throws {
        let signals = await UnixSignalsSequence(trapping: .sigterm, .sigint, .sighup)
        let group = MultiThreadedEventLoopGroup.singleton  // imagentd's one event loop thread, which runs Swift concurrency's jobs too
        let loop = group.next()
        let notifier = SystemdNotifier()
        var parts = DaemonParts()
        let core: NIOLoopBound<DaemonCore>
        do {
            core = try await start(configuration: configuration, reload: reload, configPath: configPath,
                                   passedSockets: passedSockets, logLevel: logLevel, logger: logger,
                                   loop: loop, notifier: notifier, parts: &parts)
        } catch {
            // What started stops as on a normal shutdown: the store finishes and closes its files.
            await parts.stop(logger: logger)
            try? await group.shutdownGracefully()
            throw error
        }

        for await signal in signals {
            if signal == .sighup {
                notifier.reloading()
                // STATUS= goes back to the link's sentence, whether the reload worked or not.
                let line = try? await loop.submit {
                    core.value.reload()
                    return core.value.systemdStatusLine
                }.get()
                notifier.ready(status: line ?? "configuration reload interrupted")
                continue
            }
            logger.notice("shutting down", metadata: ["signal": "\(signal)"])
            break
        }
        endAtOnce(after: shutdownDeadline, logger: logger)
        await parts.stop(logger: logger)
        try? await group.shutdownGracefully()
        logger.info("imagentd stopped")
    }

    /// Starts each part and adds it to `parts` as soon as it runs, so that a start that fails
    /// half-way stops exactly what it started, in the same order as a shutdown.
    private static func start(configuration: DaemonConfiguration, reload: (@Sendable () throws -> DaemonConfiguration)?,
                              configPath: String, passedSockets: [Int32], logLevel: LiveLogLevel, logger: Logger,
                              loop: any EventLoop, notifier: SystemdNotifier,
                              parts: inout DaemonParts) async throws -> NIOLoopBound<DaemonCore> {
        for warning in SecurityWarnings.of(configuration) { logger.warning("\(warning)") }
        let metrics = DaemonMetrics(version: DaemonCore.version)
        let persistence: SQLiteSessionPersistence
        do {
            // A missing store directory is made 0700, the database 0600, whatever the umask.
            let directory = configuration.store.directory
            for warning in try StoreFiles.prepare(directory: directory, database: SQLiteSessionPersistence.path(inDirectory: directory)) {
                logger.warning("\(warning)")
            }
            persistence = try await SQLiteSessionPersistence.open(directory: configuration.store.directory,
                                                                  durability: configuration.store.durability,
                                                                  maxBytes: configuration.store.maxBytes, on: loop,
                                                                  commitObserver: metrics.storeCommitObserver).get()
        } catch {
            logger.critical("cannot open the store in \(configuration.store.directory): \(error)")
            throw error
        }
        parts.add("store") { try? await persistence.close().get() }

        // Without endpoints or a usable token the daemon runs unconfigured: it serves its socket,
        // says what is missing, and starts the link once a reload supplies it.
        let unconfigured = reload == nil ? nil : LinkReadiness.problem(configuration, configPath: configPath)
        if let unconfigured { logger.warning("unconfigured: \(unconfigured)") }
        let link = LinkEngine(prepared: unconfigured == nil ? try LinkEngine.prepare(LinkConfiguration(configuration)) : nil,
                              eventLoop: loop, logger: logger)
        parts.add("link") { await link.shutdown() }

        // From here on the metrics live on the loop, owned by DaemonCore.
        let metricsOnLoop = NIOLoopBoundBox.makeBoxSendingValue(metrics, eventLoop: loop)
        // Sessions load before any client connects or the link comes up.
        let core = try await loop.flatSubmit {
            let sessions = SessionService(limits: SessionLimits(configuration),
                                          persistence: persistence, link: link, loop: loop, logger: logger)
            let core = DaemonCore(configuration: configuration, link: link, sessions: sessions, loop: loop, logger: logger,
                                  logLevel: logLevel, reloadConfiguration: reload, configPath: configPath,
                                  unconfigured: unconfigured, metrics: metricsOnLoop.value)
            let bound = NIOLoopBound(core, eventLoop: loop)
            return sessions.start().map { bound }
        }.get()
        // A reload's reconnect still under way finishes before the link stops, so that shutdown closes the link it made.
        parts.add("reload") {
            if let relink = try? await loop.submit({ core.value.pendingRelink }).get() { await relink.value }
        }
        link.onTransition { transition in core.value.linkChanged(transition) }
        link.onHeartbeat { interval, rtt in core.value.heartbeatChanged(interval: interval, rtt: rtt) }
        try await loop.submit {
            core.value.onLinkStatus = { _ in notifier.status(core.value.systemdStatusLine) }
        }.get()
        parts.add("clients") { try? await loop.submit { core.value.closeAllClients() }.get() }

        let server: IPCServer
        do {
            let handler = try await loop.submit { NIOLoopBound<any IPCRequestHandler>(core.value, eventLoop: loop) }.get()
            server = try await IPCServer.start(
                settings: .init(socketPath: configuration.ipc.socket, mode: configuration.ipc.mode, group: configuration.ipc.group,
                                adminGroup: configuration.ipc.adminGroup, maxPayload: UInt32(configuration.limits.maxPayloadBytes),
                                maxConnections: configuration.limits.maxClients,
                                maxConnectionsPerUID: configuration.limits.maxClientsPerUID,
                                adoptedDescriptor: passedSockets.first),
                eventLoop: loop, daemon: handler, logger: logger)
        } catch {
            logger.critical("cannot serve IPC: \(error)")
            throw error
        }
        parts.add("ipc") { await server.stop() }
        try await loop.submit {
            core.value.onLimitsChanged = { limits in
                server.updateLimits(maxConnections: limits.maxClients, perUID: limits.maxClientsPerUID)
            }
        }.get()

        // Metrics are an aid: a daemon whose endpoint cannot bind keeps serving its clients.
        if !configuration.prometheusListen.isEmpty {
            do {
                let endpoint = try await MetricsEndpoint.start(listen: configuration.prometheusListen, eventLoop: loop,
                                                               logger: logger, render: { core.value.metricsExposition() })
                parts.add("metrics endpoint") { await endpoint.stop() }
            } catch {
                logger.error("cannot serve Prometheus metrics on \(configuration.prometheusListen): \(error); imagentd runs without them")
            }
        }

        // READY=1 first (the socket serves clients whatever the link does), then the link's own STATUS= lines.
        let readyLine = try await loop.submit { core.value.systemdStatusLine }.get()
        notifier.ready(status: unconfigured == nil ? "link starting; IPC on \(configuration.ipc.socket)" : readyLine)
        let watchdog = notifier.watchdogInterval.map { interval in
            loop.scheduleRepeatedTask(initialDelay: .zero, delay: TimeAmount(interval)) { _ in notifier.watchdogPing() }
        }
        parts.add("systemd") {
            notifier.stopping()
            watchdog?.cancel()
        }
        link.start()
        logger.info("imagentd \(DaemonCore.version) started", metadata: ["socket": "\(configuration.ipc.socket)"])
        return core
    }
}

extension DaemonRunner {
    /// From the start of a shutdown: a second SIGTERM or SIGINT, or `deadline`, ends the
    /// process at once, whatever is still stopping.
    static func endAtOnce(after deadline: Duration, logger: Logger) {
        Task {
            for await signal in await UnixSignalsSequence(trapping: .sigterm, .sigint) {
                logger.warning("\(signal) while shutting down: ending now")
                _exit(1)
            }
        }
        Task {
            try await Task.sleep(for: deadline)
            logger.error("still shutting down after \(deadline.components.seconds) s: ending now")
            _exit(1)
        }
    }
}

/// The running daemon's parts, each with what stops it, in the order they started.
struct DaemonParts {
    private var parts: [(name: String, stop: @Sendable () async -> Void)] = []

    mutating func add(_ name: String, stop: @escaping @Sendable () async -> Void) {
        parts.append((name, stop))
    }

    /// Stops every part, the last started first, each once the one before it has stopped.
    func stop(logger: Logger) async {
        for part in parts.reversed() {
            logger.debug("stopping", metadata: ["part": "\(part.name)"])
            await part.stop()
        }
    }
}
