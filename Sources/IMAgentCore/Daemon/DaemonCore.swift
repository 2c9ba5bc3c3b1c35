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
    var configuration: DaemonConfiguration
    let link: LinkEngine
    let sessions: SessionService
    let logger: Logger
    let logLevel: LiveLogLevel
    private let startedAt = WallClock.nowMS()
    /// Re-reads the configuration file; nil in development mode (no file).
    let reloadConfiguration: (() throws -> DaemonConfiguration)?
    /// The file `reloadConfiguration` reads, for messages that say where to fix things.
    let configPath: String
    /// The link as the daemon reports it.
    var reported: ReportedLink
    /// Link reconfigurations run one after the other, in the order of the reloads that asked for them.
    var relinking: Task<Void, Never>?
    /// The last reload's link reconfiguration, for shutdown to wait for.
    var pendingRelink: Task<Void, Never>? { relinking }
    /// What WATCH sends and EVENTS shows.
    var events = EventFeed()
    private var clients: [UInt64: IPCClientConnection] = [:]
    /// The LINK_STATE clients last heard: only a change is sent.
    private var reportedLinkState: LinkStateValue?
    private var shuttingDown = false
    var onLinkStatus: ((LinkStatus) -> Void)?
    let metrics: DaemonMetrics
    private var connectStages = ConnectStageTimer()
    /// A reload applied new `[limits]`: the IPC server's accept-time caps follow.
    var onLimitsChanged: ((DaemonConfiguration.Limits) -> Void)?

    init(configuration: DaemonConfiguration, link: LinkEngine, sessions: SessionService, loop: EventLoop, logger: Logger,
         logLevel: LiveLogLevel, reloadConfiguration: (() throws -> DaemonConfiguration)?,
         configPath: String = "the configuration file", unconfigured: String? = nil,
         metrics: DaemonMetrics = DaemonMetrics(version: DaemonCore.version)) {
        self.configuration = configuration
        self.configPath = configPath
        self.reported = ReportedLink(unconfigured: unconfigured)
        self.sessions = sessions
        self.logLevel = logLevel
        self.link = link
        self.loop = loop
        self.logger = logger
        self.reloadConfiguration = reloadConfiguration
        self.metrics = metrics
        sessions.onSessionChange = { [unowned self] change in self.sessionChanged(change) }
        sessions.onAcknowledged = { [sendAckLatency = metrics.sendAckLatency] in sendAckLatency.record($0) }
        link.onRTTSample { [roundTrips = metrics.roundTrips] in roundTrips.record($0) }
    }

    var welcome: IPCMessage.Welcome {
        IPCMessage.Welcome(ipcVersion: 1, daemonVersion: Self.version, maxPayload: UInt32(configuration.limits.maxPayloadBytes),
                           linkState: reported.status.ipcLinkState)
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
            client.reply(to: request, .result(.init(json: events.historyJSON(for: client.peer.uid, isAdmin: client.isAdmin))))
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

    /// The unit's STATUS= line: the link, as a sentence.
    var systemdStatusLine: String {
        reported.status.systemdSentence(now: .now, wallNowMS: unixMilliseconds())
    }

    // MARK: link

    func linkChanged(_ transition: LinkTransition) {
        // The engine has logged the transition with its reason; here it goes to systemd, clients and WATCH.
        let nowMS = WallClock.nowMS()
        if reported.apply(transition, now: .now, nowMS: nowMS) { onLinkStatus?(reported.status) }
        if let ended = connectStages.enter(transition.to, at: .now) { metrics.stageCompleted(ended.stage, after: ended.took) }
        let state = reported.status.ipcLinkState
        if state != reportedLinkState {
            reportedLinkState = state
            sessions.linkStateChanged(state)
        }
        publish(events.link(transition, now: .now, nowMS: nowMS))
    }

    /// EVENT `"event":"heartbeat"` to WATCH subscribers: the interval changed.
    func heartbeatChanged(interval: Duration, rtt: Duration?) {
        // STATUS and METRICS would otherwise show the interval of the moment the link came up.
        reported.heartbeat(interval: interval, rtt: rtt)
        guard clients.values.contains(where: \.watching) else { return }
        publish(EventFeed.heartbeat(interval: interval, rtt: rtt, nowMS: WallClock.nowMS()))
    }

    /// EVENT `"event":"session"` to WATCH subscribers: the session's owner and admins only,
    /// as SESSIONS shows another user's sessions to admins only.
    func sessionChanged(_ change: SessionChange) {
        publish(events.session(change, nowMS: WallClock.nowMS())) { $0.peer.uid == change.owner || $0.isAdmin }
    }

    /// Sends an event to the WATCH subscribers `may` lets see it, in the order they connected.
    func publish(_ event: String, to may: (IPCClientConnection) -> Bool = { _ in true }) {
        for client in clients.values.sorted(by: { $0.id < $1.id }) where client.watching && may(client) {
            client.send(event: .event(.init(json: event)))
        }
    }

    /// STATUS and METRICS as of now.
    var report: DaemonReport {
        DaemonReport(link: reported.status, traffic: link.trafficCounts, configuration: configuration, sessions: sessions,
                     clients: clients.count, startedAtMS: startedAt, metrics: metrics)
    }

    /// `owner` nil: the whole daemon (root and the admin group); a uid: the
    /// link and that uid's own sessions only.
    func statusJSON(owner: UInt32? = nil) -> String { report.statusJSON(owner: owner) }

    /// `owner` as in `statusJSON(owner:)`.
    func metricsJSON(owner: UInt32? = nil) -> String { report.metricsJSON(owner: owner) }

    /// What the `prometheus_listen` endpoint serves.
    func metricsExposition() -> [UInt8] { report.metricsExposition() }
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
