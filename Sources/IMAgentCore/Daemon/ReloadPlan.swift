import JSONText

/// What a reload (SIGHUP or RELOAD) does with a new configuration: settings
/// the running daemon adopts at once, settings the link adopts through one
/// graceful reconnect, and the rest, which keep their running values until a
/// restart and are reported so the operator knows.
struct ReloadPlan {
    /// The configuration to run with from now on.
    var applied: DaemonConfiguration
    /// Keys whose new values took effect at once.
    var changedLive: [String] = []
    /// Keys whose new values take effect through one reconnect of the link.
    var changedByReconnect: [String] = []
    /// Keys whose new values wait for a restart.
    var needsRestart: [String] = []

    init(from running: DaemonConfiguration, to fresh: DaemonConfiguration) {
        applied = running
        func live<T: Equatable>(_ key: String, _ path: WritableKeyPath<DaemonConfiguration, T>) {
            guard running[keyPath: path] != fresh[keyPath: path] else { return }
            applied[keyPath: path] = fresh[keyPath: path]
            changedLive.append(key)
        }
        func relink<T: Equatable>(_ key: String, _ path: WritableKeyPath<DaemonConfiguration, T>) {
            guard running[keyPath: path] != fresh[keyPath: path] else { return }
            applied[keyPath: path] = fresh[keyPath: path]
            changedByReconnect.append(key)
        }
        func restart<T: Equatable>(_ key: String, _ path: KeyPath<DaemonConfiguration, T>) {
            if running[keyPath: path] != fresh[keyPath: path] { needsRestart.append(key) }
        }
        live("log.level", \.logLevel)
        live("limits.max_clients", \.limits.maxClients)
        live("limits.max_clients_per_uid", \.limits.maxClientsPerUID)
        live("limits.max_sessions", \.limits.maxSessions)
        live("limits.outbox_messages", \.limits.outboxMessages)
        live("limits.inbox_messages", \.limits.inboxMessages)
        relink("server.endpoints", \.server.endpoints)
        relink("server.agent_id", \.server.agentID)
        relink("server.max_frame_bytes", \.server.maxFrameBytes)
        relink("server.tls", \.server.tls)
        relink("auth", \.token)
        relink("heartbeat", \.heartbeat)
        relink("reconnect", \.reconnect)
        relink("network.watch", \.watchNetwork)
        // Any other [server] key (added later) goes the same way.
        if applied.server != fresh.server {
            applied.server = fresh.server
            changedByReconnect.append("server")
        }
        restart("ipc", \.ipc)
        restart("store", \.store)
        // The IPC codec's frame limit and WELCOME's MAX_PAYLOAD are fixed when the socket is served.
        restart("limits.max_payload_bytes", \.limits.maxPayloadBytes)
        restart("limits.max_sessions_per_uid", \.limits.maxSessionsPerUID)
        restart("limits.outbox_bytes", \.limits.outboxBytes)
        restart("limits.uid_outbox_bytes", \.limits.uidOutboxBytes)
        restart("metrics", \.prometheusListen)
        restart("metrics.prometheus_allow_remote", \.prometheusAllowRemote)
    }
}

/// RELOAD's answer (a RESULT document) and the log's summary of a reload.
struct ReloadReport: Equatable {
    /// Keys applied at once.
    var applied: [String]
    /// Keys applied through the one reconnect this reload started.
    var reconnect: [String]
    /// Keys that keep their running values until a restart.
    var needsRestart: [String]
    /// What the link still lacks: the daemon stays unconfigured.
    var unconfigured: String?

    var json: String {
        var json = JSONWriter()
        json.beginObject()
        func list(_ key: String, _ names: [String]) {
            json.raw(key, "[" + names.map(JSONWriter.quoted).joined(separator: ",") + "]")
        }
        list("applied", applied)
        list("applied_by_reconnect", reconnect)
        list("needs_restart", needsRestart)
        json.field("unconfigured", unconfigured)
        json.endObject()
        return json.text
    }
}

/// Why a reload changed nothing: the file's problems, as `file:line: message` lines.
struct ReloadFailure: Error, CustomStringConvertible {
    var description: String
}
