import AgentIPC
import IMLink
import Logging

/// The admin requests (CONNECT, DISCONNECT, RECONNECT, RELOAD) and the reload they share with SIGHUP.
extension DaemonCore {
    func admin(_ message: IPCMessage, request: UInt32, from client: IPCClientConnection) {
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
        let relink = !plan.changedByReconnect.isEmpty || (reported.unconfigured != nil) != (missing != nil)
        if relink {
            reported.replacingEngine()
            let link = self.link
            let previous = relinking
            // A link an administrator took down stays down (`imagent connect` brings it up).
            let keepDown = reported.status.phase == .stopped(.userDisconnected)
            relinking = Task {
                await previous?.value
                await link.reconfigure(prepared, keepDown: keepDown)
            }
        }
        if reported.configured(lacking: missing) { onLinkStatus?(reported.status) }
        let report = ReloadReport(applied: plan.changedLive, reconnect: relink ? plan.changedByReconnect : [],
                                  needsRestart: plan.needsRestart, unconfigured: missing)
        publish(events.reload(report, nowMS: WallClock.nowMS()))
        logger.notice("configuration reloaded", metadata: [
            "applied": "\(plan.changedLive.joined(separator: ","))",
            "applied_by_reconnect": "\(report.reconnect.joined(separator: ","))",
            "needs_restart": "\(plan.needsRestart.joined(separator: ","))",
        ])
        return .success(report)
    }
}
