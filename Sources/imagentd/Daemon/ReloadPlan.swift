/// What a reload (SIGHUP or RELOAD) does with a new configuration: settings
/// the running daemon can adopt are taken; the rest keep their running values
/// and are reported, so the operator knows a restart is needed for them.
struct ReloadPlan {
    /// The configuration to run with from now on.
    var applied: DaemonConfiguration
    /// Keys whose new values took effect.
    var changedLive: [String] = []
    /// Keys whose new values wait for a restart.
    var needsRestart: [String] = []

    init(from running: DaemonConfiguration, to fresh: DaemonConfiguration) {
        applied = running
        func live<T: Equatable>(_ key: String, _ path: WritableKeyPath<DaemonConfiguration, T>) {
            guard running[keyPath: path] != fresh[keyPath: path] else { return }
            applied[keyPath: path] = fresh[keyPath: path]
            changedLive.append(key)
        }
        func restart<T: Equatable>(_ key: String, _ path: KeyPath<DaemonConfiguration, T>) {
            if running[keyPath: path] != fresh[keyPath: path] { needsRestart.append(key) }
        }
        live("log.level", \.logLevel)
        live("limits.max_clients", \.limits.maxClients)
        live("limits.max_clients_per_uid", \.limits.maxClientsPerUID)
        live("limits.outbox_messages", \.limits.outboxMessages)
        live("limits.inbox_messages", \.limits.inboxMessages)
        restart("server", \.server)
        restart("auth", \.token)
        restart("ipc", \.ipc)
        restart("store", \.store)
        restart("heartbeat", \.heartbeat)
        restart("reconnect", \.reconnect)
        restart("limits.max_sessions", \.limits.maxSessions)
        restart("limits.max_sessions_per_uid", \.limits.maxSessionsPerUID)
        restart("limits.max_payload_bytes", \.limits.maxPayloadBytes)
        restart("limits.outbox_bytes", \.limits.outboxBytes)
        restart("limits.uid_outbox_bytes", \.limits.uidOutboxBytes)
        restart("network.watch", \.watchNetwork)
        restart("metrics", \.prometheusListen)
    }
}
