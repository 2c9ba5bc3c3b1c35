#if canImport(Glibc)
import Glibc
#endif
import AgentIPC
import IMLink
import JSONText
import Logging
import NIOCore

/// The daemon's state on its one event loop: connected clients, the link,
/// and the answers to every IPC request. No locks: everything here runs on
/// `loop`, and slow work (SQLite, token commands) runs elsewhere and comes back.
final class DaemonCore: IPCRequestHandler {
    static let version = "0.1.0"

    let loop: EventLoop
    private(set) var configuration: DaemonConfiguration
    let link: LinkEngine
    let sessions: SessionService
    private let logger: Logger
    private let logLevel: LiveLogLevel
    private let startedAt = WallClock.nowMS()
    /// Re-reads the configuration file; nil in development mode (no file).
    private let reloadConfiguration: (() throws -> DaemonConfiguration)?
    private var clients: [UInt64: IPCClientConnection] = [:]
    private var linkStatus: LinkStatus
    /// The LINK_STATE clients last heard: only a change is sent.
    private var reportedLinkState: LinkStateValue?
    private var shuttingDown = false
    var onLinkStatus: ((LinkStatus) -> Void)?
    let metrics: DaemonMetrics
    /// The connect stage the link is in and since when, for the stage histogram.
    private var currentStage: (stage: ConnectStage, since: ContinuousClock.Instant)?
    /// A reload applied new `[limits]`: the IPC server's accept-time caps follow.
    var onLimitsChanged: ((DaemonConfiguration.Limits) -> Void)?

    init(configuration: DaemonConfiguration, link: LinkEngine, sessions: SessionService, loop: EventLoop, logger: Logger,
         logLevel: LiveLogLevel, reloadConfiguration: (() throws -> DaemonConfiguration)?) {
        self.configuration = configuration
        self.sessions = sessions
        self.logLevel = logLevel
        self.link = link
        self.loop = loop
        self.logger = logger
        self.reloadConfiguration = reloadConfiguration
        self.linkStatus = LinkStatus(phase: .stopped(.notStarted))
        self.metrics = DaemonMetrics(version: Self.version, startedAtUnixMS: UInt64(WallClock.nowMS()))
        sessions.onSessionChange = { [unowned self] change in self.sessionChanged(change) }
    }

    var welcome: IPCMessage.Welcome {
        IPCMessage.Welcome(ipcVersion: 1, daemonVersion: Self.version, maxPayload: UInt32(configuration.limits.maxPayloadBytes),
                           linkState: linkStatus.ipcLinkState)
    }

    // MARK: clients

    func clientGreeted(_ client: IPCClientConnection) -> (IPCErrorCode, String)? {
        if shuttingDown { return (.shuttingDown, "imagentd is shutting down") }
        guard clients.count < configuration.limits.maxClients else {
            logger.warning("refused a client: too many clients", metadata: ["client": "\(client.label)", "limit": "\(configuration.limits.maxClients)"])
            return (.limitReached, "imagentd already serves \(configuration.limits.maxClients) clients ([limits] max_clients)")
        }
        clients[client.id] = client
        sessions.clientConnected(client)
        return nil
    }

    func clientDisconnected(_ client: IPCClientConnection) {
        clients[client.id] = nil
        // Its sessions live on, detached, for the next attach.
        sessions.clientDisconnected(client)
        logger.debug("client disconnected", metadata: ["client": "\(client.label)"])
    }

    func clientCanReceive(_ client: IPCClientConnection) {
        sessions.clientCanReceive(client)
    }

    /// Closes every client: shutdown has begun.
    func closeAllClients() {
        shuttingDown = true
        for client in clients.values { client.closeWithError(.shuttingDown, "imagentd is shutting down") }
    }

    // MARK: requests

    func handle(_ message: IPCMessage, request: UInt32, from client: IPCClientConnection) {
        switch message {
        case .ping:
            client.reply(to: request, .pong(.init()))
        case .status:
            // Other users' totals are an admin's business; everyone sees the link and their own sessions.
            client.reply(to: request, .result(.init(json: statusJSON(owner: client.isAdmin ? nil : client.peer.uid))))
        case .metrics:
            client.reply(to: request, .result(.init(json: metricsJSON(owner: client.isAdmin ? nil : client.peer.uid))))
        case .sessions:
            client.reply(to: request, .result(.init(json: sessions.sessionsJSON(for: client))))
        case .watch:
            client.watching = true
            client.reply(to: request, .ok(.init()))
        case .connect, .disconnect, .reconnect, .reload:
            guard client.isAdmin else {
                let group = configuration.ipc.adminGroup
                client.fail(request, .permissionDenied, "\(message.op) needs root or membership in the \(group.isEmpty ? "admin" : group) group")
                return
            }
            admin(message, request: request, from: client)
        case .open, .close, .detach, .send, .ack:
            guard !shuttingDown else {
                client.fail(request, .shuttingDown, "imagentd is shutting down")
                return
            }
            sessions.handle(message, request: request, from: client)
        case .hello, .ok, .welcome, .opened, .accepted, .result, .pong, .error, .message, .acked, .expired,
             .sessionState, .linkState, .event:
            // IPCClientHandler lets only requests through, and HELLO only once.
            preconditionFailure("\(message.op) reached the daemon as a request")
        }
    }

    private func admin(_ message: IPCMessage, request: UInt32, from client: IPCClientConnection) {
        logger.notice("admin request", metadata: ["op": "\(message.op)", "client": "\(client.label)"])
        switch message {
        case .connect: link.userConnect()
        case .disconnect: link.userDisconnect()
        case .reconnect: link.userReconnect()
        case .reload:
            if let problem = reload() {
                client.fail(request, .internal, problem)
                return
            }
        default:
            preconditionFailure("admin() handles CONNECT, DISCONNECT, RECONNECT and RELOAD only")
        }
        client.reply(to: request, .ok(.init()))
    }

    /// Re-reads the configuration (SIGHUP or RELOAD). Returns what went wrong, or nil.
    @discardableResult
    func reload() -> String? {
        guard let reloadConfiguration else { return "development mode has no configuration file to reload" }
        do {
            let fresh = try reloadConfiguration()
            let report = ReloadPlan(from: configuration, to: fresh)
            configuration = report.applied
            onLimitsChanged?(configuration.limits)
            logLevel.level = Logger.Level(configuration.logLevel)
            logger.notice("configuration reloaded", metadata: [
                "applied": "\(report.changedLive.joined(separator: ","))",
                "needs_restart": "\(report.needsRestart.joined(separator: ","))",
            ])
            return nil
        } catch {
            logger.error("configuration not reloaded; keeping the running one", metadata: ["problems": "\(error)"])
            return "configuration not reloaded: \(error)"
        }
    }

    // MARK: link

    func linkChanged(_ transition: LinkTransition) {
        // The engine has logged the transition with its reason; here it goes to systemd and WATCH.
        linkStatus = transition.status
        onLinkStatus?(transition.status)
        timeStages(transition.to)
        let state = transition.status.ipcLinkState
        if state != reportedLinkState {
            reportedLinkState = state
            sessions.linkStateChanged(state)
        }
        var event = JSONWriter()
        event.beginObject()
        event.field("event", "link")
        event.field("time_ms", WallClock.nowMS())
        event.field("state", transition.status.state)
        event.field("detail", transition.status.detail)
        event.field("reason", transition.reason)
        event.endObject()
        for client in clients.values where client.watching {
            client.send(event: .event(.init(json: event.text)))
        }
    }

    /// EVENT `"event":"heartbeat"` to WATCH subscribers: the interval changed.
    func heartbeatChanged(interval: Duration, rtt: Duration?) {
        // STATUS and METRICS read `linkStatus`, which only link transitions
        // replace; without this they kept showing the interval of the moment
        // the link came up (15 s) while NAT probing had raised it.
        linkStatus.heartbeatInterval = interval
        linkStatus.smoothedRTT = rtt ?? linkStatus.smoothedRTT
        let watchers = clients.values.filter(\.watching)
        guard !watchers.isEmpty else { return }
        var event = JSONWriter()
        event.beginObject()
        event.field("event", "heartbeat")
        event.field("time_ms", WallClock.nowMS())
        event.field("interval_s", interval.seconds)
        event.field("rtt_ms", rtt.map(\.milliseconds))
        event.endObject()
        for client in watchers.sorted(by: { $0.id < $1.id }) {
            client.send(event: .event(.init(json: event.text)))
        }
    }

    /// EVENT `"event":"session"` to WATCH subscribers: the session's owner and admins only,
    /// as SESSIONS shows another user's sessions to admins only.
    func sessionChanged(_ change: SessionChange) {
        let watchers = clients.values.filter { $0.watching && ($0.peer.uid == change.owner || $0.isAdmin) }
        guard !watchers.isEmpty else { return }
        var event = JSONWriter()
        event.beginObject()
        event.field("event", "session")
        event.field("time_ms", WallClock.nowMS())
        event.field("change", change.kind.rawValue)
        event.field("session", change.session)
        event.field("service", change.service)
        event.field("owner", change.owner)
        event.field("state", change.state.description)
        event.field("reason", change.reason)
        event.endObject()
        for client in watchers.sorted(by: { $0.id < $1.id }) {
            client.send(event: .event(.init(json: event.text)))
        }
    }

    /// The store's files: the database and its write-ahead log, in bytes.
    var storeFileSizes: (database: Int, wal: Int) {
        let path = SQLiteSessionPersistence.path(inDirectory: configuration.store.directory)
        func size(_ file: String) -> Int {
            var status = stat()
            return stat(file, &status) == 0 ? Int(status.st_size) : 0
        }
        return (size(path), size(path + "-wal"))
    }

    /// `owner` nil: the whole daemon (root and the admin group); a uid: the
    /// link and that uid's own sessions only.
    func statusJSON(owner: UInt32? = nil) -> String {
        let now = WallClock.nowMS()
        var json = JSONWriter()
        json.beginObject()
        json.beginObject("link")
        json.field("state", linkStatus.state)
        json.field("detail", linkStatus.detail)
        json.field("endpoint", linkStatus.endpoint)
        json.field("connected_since_ms", linkStatus.connectedSinceUnixMS)
        json.field("uptime_s", linkStatus.connectedSinceUnixMS.map { now >= $0 ? (now - $0) / 1000 : 0 })
        json.field("rtt_ms", linkStatus.smoothedRTT.map(\.milliseconds))
        json.field("heartbeat_s", linkStatus.heartbeatInterval.map(\.seconds))
        json.field("reconnects", linkStatus.reconnectCount)
        json.field("attempts", linkStatus.attempts)
        json.field("last_error", linkStatus.lastError)
        json.endObject()
        json.beginObject("daemon")
        json.field("version", Self.version)
        json.field("pid", Int(getpid()))
        json.field("uptime_s", (now - startedAt) / 1000)
        if owner == nil { json.field("clients", clients.count) }
        json.endObject()
        json.beginObject("sessions")
        let counts = owner.map(sessions.counts(owner:)) ?? sessions.counts
        if let owner { json.field("owner", owner) }
        json.field("count", counts.sessions)
        json.field("outbox", counts.outbox)
        json.field("inbox", counts.inbox)
        let queue = sessions.queueBytes
        json.field("outbox_bytes", queue.outbox)
        json.endObject()
        guard owner == nil else {
            json.endObject()
            return json.text
        }
        let files = storeFileSizes
        json.beginObject("store")
        json.field("path", SQLiteSessionPersistence.path(inDirectory: configuration.store.directory))
        json.field("db_bytes", files.database)
        json.field("wal_bytes", files.wal)
        json.field("memory_bytes", queue.memory)
        json.field("memory_budget_bytes", configuration.store.memoryBudgetBytes)
        json.field("failures", sessions.storeFailuresTotal)
        json.field("last_error", sessions.lastStoreFailure?.text)
        json.field("last_error_ms", sessions.lastStoreFailure?.atMS)
        json.endObject()
        json.endObject()
        return json.text
    }

    /// `owner` as in `statusJSON(owner:)`: a non-admin sees the link and its own sessions' figures only.
    func metricsJSON(owner: UInt32? = nil) -> String {
        guard let owner else {
            let snapshot = metricsSnapshot()
            snapshot.apply(to: metrics)
            return snapshot.json(histograms: metrics)
        }
        return metricsSnapshot().json(restrictedTo: sessions.counts(owner: owner))
    }

    /// What the `prometheus_listen` endpoint serves.
    func metricsExposition() -> [UInt8] {
        metricsSnapshot().apply(to: metrics)
        return metrics.exposition()
    }

    private func metricsSnapshot() -> MetricsSnapshot {
        let counts = sessions.counts
        let files = storeFileSizes
        let queue = sessions.queueBytes
        return MetricsSnapshot(
            linkUp: linkStatus.state == "connected", connectAttempts: linkStatus.attempts, reconnects: linkStatus.reconnectCount,
            traffic: link.traffic, rtt: linkStatus.smoothedRTT, heartbeatInterval: linkStatus.heartbeatInterval, ipcClients: clients.count,
            sessions: counts.sessions, outboxMessages: counts.outbox, inboxMessages: counts.inbox,
            outboxBytes: queue.outbox, windowBytes: queue.memory, messagesExpired: sessions.expiredTotal,
            storeFailures: sessions.storeFailuresTotal, storeDatabaseBytes: files.database, storeWALBytes: files.wal)
    }

    /// Records how long each connect stage took once the next one (or LOGIN_OK) begins.
    private func timeStages(_ phase: LinkPhase) {
        let now = ContinuousClock.now
        if let current = currentStage {
            switch phase {
            case .connecting(let next, _) where next.rawValue > current.stage.rawValue:
                metrics.stageCompleted(current.stage, after: now - current.since)
            case .connected:
                metrics.stageCompleted(current.stage, after: now - current.since)
            case .connecting, .stopped, .waitingToReconnect, .waitingForNetwork, .disconnecting:
                break
            }
        }
        if case .connecting(let stage, _) = phase {
            if currentStage?.stage != stage { currentStage = (stage, now) }
        } else {
            currentStage = nil
        }
    }
}

extension LinkStatus {
    var ipcLinkState: LinkStateValue {
        switch state {
        case "connected": .connected
        case "connecting": .connecting
        case "disconnecting": .disconnecting
        default: .disconnected
        }
    }
}

extension Duration {
    var milliseconds: Double {
        Double(components.seconds) * 1000 + Double(components.attoseconds) / 1e15
    }

    var seconds: Double { milliseconds / 1000 }
}
