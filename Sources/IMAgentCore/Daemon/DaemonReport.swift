#if canImport(Glibc)
import Glibc
#endif
import IMLink
import JSONText

/// STATUS and METRICS: what the daemon says of itself, read from its parts when asked.
/// `owner` nil is the whole daemon (root and the admin group); a uid sees the link and
/// its own sessions' figures only.
struct DaemonReport {
    let link: LinkStatus
    let traffic: LinkTraffic.Counts
    let configuration: DaemonConfiguration
    let sessions: SessionService
    let clients: Int
    let startedAtMS: UInt64
    let metrics: DaemonMetrics

    func statusJSON(owner: UInt32?) -> String {
        let now = WallClock.nowMS()
        var json = JSONWriter()
        json.beginObject()
        json.beginObject("link")
        let monotonicNow = MonotonicInstant.now
        json.field("state", link.state)
        json.field("detail", link.sentence(now: monotonicNow))
        json.field("next_step", link.nextStep(now: monotonicNow))
        json.field("endpoint", link.endpoint)
        json.raw("endpoints", "[" + configuration.server.endpoints.map(JSONWriter.quoted).joined(separator: ",") + "]")
        json.field("connected_since_ms", link.connectedSinceUnixMS)
        json.field("uptime_s", link.connectedSinceUnixMS.map { now >= $0 ? (now - $0) / 1000 : 0 })
        json.field("rtt_ms", link.smoothedRTT.map(\.milliseconds))
        json.field("heartbeat_s", link.heartbeatInterval.map(\.seconds))
        json.field("reconnects", link.reconnectCount)
        json.field("attempts", link.attempts)
        json.field("last_error", link.lastError.map(LinkStatus.plain))
        json.field("last_error_ms", link.lastErrorAtUnixMS)
        json.field("server_clock_offset_ms", link.serverClockOffsetMS)
        json.field("server_certificate_expires_ms", link.serverCertificateNotAfterUnixMS)
        json.field("unconfigured", link.unconfigured)
        if let grant = link.brokerGrant { json.raw("mqtt_broker", grant.json) }
        json.endObject()
        json.beginObject("daemon")
        json.field("version", DaemonCore.version)
        json.field("pid", Int(getpid()))
        json.field("uptime_s", (now - startedAtMS) / 1000)
        if owner == nil { json.field("clients", clients) }
        json.endObject()
        json.beginObject("sessions")
        let counts = ownCounts(owner)
        if let owner { json.field("owner", owner) }
        json.field("count", counts.sessions)
        json.field("outbox", counts.outbox)
        json.field("inbox", counts.inbox)
        json.field("outbox_bytes", counts.outboxBytes)
        sessions.writeFailedSessions(into: &json, owner: owner)
        json.endObject()
        // The store is the daemon's, not one user's, and the memory it holds reflects every
        // user's traffic: admins only.
        if owner == nil { writeStore(into: &json) }
        json.endObject()
        return json.text
    }

    func metricsJSON(owner: UInt32?) -> String {
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

    /// The store's files: the database and its write-ahead log, in bytes.
    private var storeFileSizes: (database: Int, wal: Int) {
        let path = SQLiteSessionPersistence.path(inDirectory: configuration.store.directory)
        func size(_ file: String) -> Int {
            var status = stat()
            return stat(file, &status) == 0 ? Int(status.st_size) : 0
        }
        return (size(path), size(path + "-wal"))
    }

    /// STATUS's `sessions` figures: every session for `owner` nil, else that uid's only.
    private func ownCounts(_ owner: UInt32?) -> (sessions: Int, outbox: Int, inbox: Int, outboxBytes: Int) {
        if let owner { return sessions.counts(owner: owner) }
        let all = sessions.counts
        return (all.sessions, all.outbox, all.inbox, sessions.queueBytes.outbox)
    }

    /// STATUS's `store` object.
    private func writeStore(into json: inout JSONWriter) {
        let files = storeFileSizes
        json.beginObject("store")
        json.field("path", SQLiteSessionPersistence.path(inDirectory: configuration.store.directory))
        json.field("db_bytes", files.database)
        json.field("wal_bytes", files.wal)
        json.field("memory_bytes", sessions.queueBytes.memory)
        json.field("memory_budget_bytes", configuration.store.memoryBudgetBytes)
        json.field("failures", sessions.storeFailuresTotal)
        json.field("last_error", sessions.lastStoreFailure?.text)
        json.field("last_error_ms", sessions.lastStoreFailure?.atMS)
        json.endObject()
    }

    private func metricsSnapshot() -> MetricsSnapshot {
        let counts = sessions.counts
        let files = storeFileSizes
        let queue = sessions.queueBytes
        return MetricsSnapshot(
            linkUp: link.state == "connected", connectAttempts: link.attempts, reconnects: link.reconnectCount,
            traffic: traffic, rtt: link.smoothedRTT, heartbeatInterval: link.heartbeatInterval, ipcClients: clients,
            sessions: counts.sessions, outboxMessages: counts.outbox, inboxMessages: counts.inbox,
            outboxBytes: queue.outbox, windowBytes: queue.memory, messagesExpired: sessions.expiredTotal,
            messagesAccepted: sessions.acceptedTotal, messagesReceived: sessions.receivedTotal, messagesResent: sessions.resentTotal,
            messagesRedelivered: sessions.redeliveredTotal, storeFailures: sessions.storeFailuresTotal,
            storeDatabaseBytes: files.database, storeWALBytes: files.wal)
    }
}
