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
    /// The file `reloadConfiguration` reads, for messages that say where to fix things.
    private let configPath: String
    /// What the link lacks (endpoints, a usable token) while the daemon runs unconfigured; nil: configured.
    private(set) var unconfigured: String?
    /// Link reconfigurations run one after the other, in the order of the reloads that asked for them.
    private var relinking: Task<Void, Never>?
    /// The last reload's link reconfiguration, for shutdown to wait for.
    var pendingRelink: Task<Void, Never>? { relinking }
    /// A reload replaced the link: the old one's closing steps do not change the status.
    private var relinkPending = false
    /// The replaced links' counts, so that reconnects and attempts keep counting up across reloads.
    private var countOffset = (reconnects: 0, attempts: 0)
    private var everConnected = false
    /// Recent link and session events for EVENTS (bounded).
    private var recentEvents = EventRing()
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
         logLevel: LiveLogLevel, reloadConfiguration: (() throws -> DaemonConfiguration)?,
         configPath: String = "the configuration file", unconfigured: String? = nil,
         metrics: DaemonMetrics = DaemonMetrics(version: DaemonCore.version)) {
        self.configuration = configuration
        self.configPath = configPath
        self.unconfigured = unconfigured
        self.sessions = sessions
        self.logLevel = logLevel
        self.link = link
        self.loop = loop
        self.logger = logger
        self.reloadConfiguration = reloadConfiguration
        self.linkStatus = unconfigured.map(LinkStatus.unconfigured) ?? LinkStatus(phase: .stopped(.notStarted))
        self.metrics = metrics
        sessions.onSessionChange = { [unowned self] change in self.sessionChanged(change) }
        sessions.onAcknowledged = { [sendAckLatency = metrics.sendAckLatency] in sendAckLatency.record($0) }
        link.onRTTSample { [roundTrips = metrics.roundTrips] in roundTrips.record($0) }
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
        case .events:
            let visible = recentEvents.visible(to: client.peer.uid, isAdmin: client.isAdmin)
            client.reply(to: request, .result(.init(json: #"{"events":["# + visible.map(\.json).joined(separator: ",") + "]}")))
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
            switch reload() {
            case .success(let report):
                client.reply(to: request, .result(.init(json: report.json)))
            case .failure(let failure):
                client.fail(request, .internal, failure.description)
            }
            return
        default:
            preconditionFailure("admin() handles CONNECT, DISCONNECT, RECONNECT and RELOAD only")
        }
        client.reply(to: request, .ok(.init()))
    }

    /// Re-reads the configuration (SIGHUP or RELOAD) and applies it: live
    /// settings at once, link settings through one reconnect. A file with
    /// problems changes nothing.
    @discardableResult
    func reload() -> Result<ReloadReport, ReloadFailure> {
        guard let reloadConfiguration else {
            return .failure(ReloadFailure(description: "development mode has no configuration file to reload"))
        }
        let plan: ReloadPlan
        let missing: String?
        let prepared: LinkEngine.Prepared?
        do {
            let fresh = try reloadConfiguration()
            plan = ReloadPlan(from: configuration, to: fresh)
            missing = LinkReadiness.problem(plan.applied, configPath: configPath)
            // TLS files are loaded here, before anything changes: a bad one fails the reload.
            prepared = missing == nil ? try LinkEngine.prepare(LinkConfiguration(plan.applied)) : nil
        } catch {
            logger.error("configuration not reloaded; keeping the running one", metadata: ["problems": "\(error)"])
            return .failure(ReloadFailure(description: "configuration not reloaded: \(error)"))
        }
        configuration = plan.applied
        logLevel.level = Logger.Level(configuration.logLevel)
        sessions.updateLimits(SessionLimits(configuration))
        onLimitsChanged?(configuration.limits)

        // Link settings changed, or the link becomes possible or impossible: one reconnect.
        let relink = !plan.changedByReconnect.isEmpty || (unconfigured != nil) != (missing != nil)
        let counts = (reconnects: linkStatus.reconnectCount, attempts: linkStatus.attempts)
        if relink {
            // The counters keep counting up across the replaced link; its first connect is a
            // reconnect when the old one had been up.
            countOffset = (linkStatus.reconnectCount + (everConnected ? 1 : 0), linkStatus.attempts)
            everConnected = false
            relinkPending = true
            let link = self.link
            let previous = relinking
            // A link an administrator took down stays down (`imagent connect` brings it up).
            let keepDown = linkStatus.phase == .stopped(.userDisconnected)
            relinking = Task {
                await previous?.value
                await link.reconfigure(prepared, keepDown: keepDown)
            }
        }
        unconfigured = missing
        if let missing {
            var status = LinkStatus.unconfigured(missing)
            status.reconnectCount = counts.reconnects
            status.attempts = counts.attempts
            linkStatus = status
            onLinkStatus?(linkStatus)
        }
        let report = ReloadReport(applied: plan.changedLive, reconnect: relink ? plan.changedByReconnect : [],
                                  needsRestart: plan.needsRestart, unconfigured: missing)
        var event = JSONWriter()
        event.beginObject()
        event.field("event", "reload")
        event.field("time_ms", WallClock.nowMS())
        event.raw("report", report.json)
        event.endObject()
        recentEvents.append(.init(timeMS: WallClock.nowMS(), owner: nil, json: event.text))
        for client in clients.values.sorted(by: { $0.id < $1.id }) where client.watching {
            client.send(event: .event(.init(json: event.text)))
        }
        logger.notice("configuration reloaded", metadata: [
            "applied": "\(plan.changedLive.joined(separator: ","))",
            "applied_by_reconnect": "\(report.reconnect.joined(separator: ","))",
            "needs_restart": "\(plan.needsRestart.joined(separator: ","))",
        ])
        return .success(report)
    }

    /// The unit's STATUS= line: the link, as a sentence.
    var systemdStatusLine: String {
        linkStatus.systemdSentence(now: .now, wallNowMS: unixMilliseconds())
    }

    // MARK: link

    func linkChanged(_ transition: LinkTransition) {
        // The engine has logged the transition with its reason; here it goes to systemd and WATCH.
        // While unconfigured, the old link's last steps (closing it) do not replace that state.
        // Until the new link's first step, transitions are the old link closing.
        if relinkPending && transition.from == .stopped(.notStarted) { relinkPending = false }
        let oldLinkClosing = relinkPending
        if case .connected = transition.to { everConnected = true }
        if unconfigured == nil && !oldLinkClosing {
            var status = transition.status
            status.reconnectCount += countOffset.reconnects
            status.attempts += countOffset.attempts
            status.phase = transition.to
            status.detail = status.sentence(now: .now)
            // The time of the last error is the time it first appeared.
            status.lastErrorAtUnixMS = status.lastError == nil ? nil
                : (status.lastError == linkStatus.lastError ? linkStatus.lastErrorAtUnixMS : WallClock.nowMS())
            linkStatus = status
            onLinkStatus?(status)
        }
        timeStages(transition.to)
        let state = linkStatus.ipcLinkState
        if state != reportedLinkState {
            reportedLinkState = state
            sessions.linkStateChanged(state)
        }
        var event = JSONWriter()
        event.beginObject()
        event.field("event", "link")
        event.field("time_ms", WallClock.nowMS())
        event.field("state", transition.status.state)
        event.field("detail", transition.status.sentence(now: .now))
        event.field("reason", transition.reason)
        event.endObject()
        recentEvents.append(.init(timeMS: WallClock.nowMS(), owner: nil, json: event.text))
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
        recentEvents.append(.init(timeMS: WallClock.nowMS(), owner: change.owner, json: event.text))
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
        let monotonicNow = MonotonicInstant.now
        json.field("state", linkStatus.state)
        json.field("detail", linkStatus.sentence(now: monotonicNow))
        json.field("next_step", linkStatus.nextStep(now: monotonicNow))
        json.field("endpoint", linkStatus.endpoint)
        json.raw("endpoints", "[" + configuration.server.endpoints.map(JSONWriter.quoted).joined(separator: ",") + "]")
        json.field("connected_since_ms", linkStatus.connectedSinceUnixMS)
        json.field("uptime_s", linkStatus.connectedSinceUnixMS.map { now >= $0 ? (now - $0) / 1000 : 0 })
        json.field("rtt_ms", linkStatus.smoothedRTT.map(\.milliseconds))
        json.field("heartbeat_s", linkStatus.heartbeatInterval.map(\.seconds))
        json.field("reconnects", linkStatus.reconnectCount)
        json.field("attempts", linkStatus.attempts)
        json.field("last_error", linkStatus.lastError.map(LinkStatus.plain))
        json.field("last_error_ms", linkStatus.lastErrorAtUnixMS)
        json.field("server_clock_offset_ms", linkStatus.serverClockOffsetMS)
        json.field("server_certificate_expires_ms", linkStatus.serverCertificateNotAfterUnixMS)
        json.field("unconfigured", linkStatus.unconfigured)
        if let grant = linkStatus.brokerGrant { json.raw("mqtt_broker", grant.json) }
        json.endObject()
        json.beginObject("daemon")
        json.field("version", Self.version)
        json.field("pid", Int(getpid()))
        json.field("uptime_s", (now - startedAt) / 1000)
        if owner == nil { json.field("clients", clients.count) }
        json.endObject()
        json.beginObject("sessions")
        let counts = ownCounts(owner)
        if let owner { json.field("owner", owner) }
        json.field("count", counts.sessions)
        json.field("outbox", counts.outbox)
        json.field("inbox", counts.inbox)
        json.field("outbox_bytes", counts.outboxBytes)
        json.endObject()
        // The store is the daemon's, not one user's, and the memory it holds reflects every
        // user's traffic: admins only.
        if owner == nil { writeStore(into: &json, memoryBytes: sessions.queueBytes.memory) }
        json.endObject()
        return json.text
    }

    /// STATUS's `sessions` figures: every session for `owner` nil, else that uid's only.
    private func ownCounts(_ owner: UInt32?) -> (sessions: Int, outbox: Int, inbox: Int, outboxBytes: Int) {
        if let owner { return sessions.counts(owner: owner) }
        let all = sessions.counts
        return (all.sessions, all.outbox, all.inbox, sessions.queueBytes.outbox)
    }

    /// STATUS's `store` object.
    private func writeStore(into json: inout JSONWriter, memoryBytes: Int) {
        let files = storeFileSizes
        json.beginObject("store")
        json.field("path", SQLiteSessionPersistence.path(inDirectory: configuration.store.directory))
        json.field("db_bytes", files.database)
        json.field("wal_bytes", files.wal)
        json.field("memory_bytes", memoryBytes)
        json.field("memory_budget_bytes", configuration.store.memoryBudgetBytes)
        json.field("failures", sessions.storeFailuresTotal)
        json.field("last_error", sessions.lastStoreFailure?.text)
        json.field("last_error_ms", sessions.lastStoreFailure?.atMS)
        json.endObject()
    }

    /// `owner` as in `statusJSON(owner:)`: a non-admin sees the link and its own sessions' figures only.
    func metricsJSON(owner: UInt32? = nil) -> String {
        let snapshot = metricsSnapshot()
        guard let owner else {
            snapshot.apply(to: metrics)
            return snapshot.json(metrics)
        }
        return snapshot.json(metrics, restrictedTo: sessions.counts(owner: owner))
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
            traffic: link.trafficCounts, rtt: linkStatus.smoothedRTT, heartbeatInterval: linkStatus.heartbeatInterval, ipcClients: clients.count,
            sessions: counts.sessions, outboxMessages: counts.outbox, inboxMessages: counts.inbox,
            outboxBytes: queue.outbox, windowBytes: queue.memory, messagesExpired: sessions.expiredTotal,
            messagesAccepted: sessions.acceptedTotal, messagesReceived: sessions.receivedTotal, messagesResent: sessions.resentTotal, messagesRedelivered: sessions.redeliveredTotal,
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
