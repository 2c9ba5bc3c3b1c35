import JSONText

/// The values a scrape or METRICS reads at one instant, gathered by
/// `DaemonCore`; counters are running totals since the daemon started.
struct MetricsSnapshot {
    var linkUp: Bool
    var connectAttempts: Int
    var reconnects: Int
    var traffic: LinkTraffic.Counts
    var rtt: Duration?
    var heartbeatInterval: Duration?
    var ipcClients: Int
    var sessions: Int
    var outboxMessages: Int
    var inboxMessages: Int
    /// Outbound payload bytes queued, and payload bytes held in memory (the windows).
    var outboxBytes: Int
    var windowBytes: Int
    var messagesExpired: Int
    /// Local store failures (disk or database), which dropped the link without blaming the server.
    var storeFailures: Int
    var storeDatabaseBytes: Int
    var storeWALBytes: Int

    /// Puts the snapshot into the registry's gauges and counters.
    func apply(to metrics: DaemonMetrics) {
        metrics.linkUp.set(to: linkUp ? 1 : 0)
        metrics.linkAttempts.update(to: connectAttempts)
        metrics.linkReconnects.update(to: reconnects)
        metrics.framesSent.update(to: traffic.framesOut)
        metrics.framesReceived.update(to: traffic.framesIn)
        metrics.bytesSent.update(to: traffic.bytesOut)
        metrics.bytesReceived.update(to: traffic.bytesIn)
        metrics.setKnown("imagentd_link_rtt_seconds",
                         help: "Smoothed round-trip time of the link's PING/PONG; absent before the first sample.",
                         to: rtt?.seconds)
        metrics.setKnown("imagentd_heartbeat_interval_seconds",
                         help: "The heartbeat interval in force, before jitter; absent while the link is down.",
                         to: linkUp ? heartbeatInterval?.seconds : nil)
        metrics.ipcClients.set(to: Double(ipcClients))
        metrics.sessions.set(to: Double(sessions))
        metrics.outboxMessages.set(to: Double(outboxMessages))
        metrics.inboxMessages.set(to: Double(inboxMessages))
        metrics.outboxBytes.set(to: Double(outboxBytes))
        metrics.windowBytes.set(to: Double(windowBytes))
        metrics.storeFailures.update(to: storeFailures)
        metrics.messagesExpired.update(to: messagesExpired)
        metrics.storeDatabaseBytes.set(to: Double(storeDatabaseBytes))
        metrics.storeWALBytes.set(to: Double(storeWALBytes))
    }

    /// METRICS' document for a client that is not an admin: the link's figures and
    /// `own` (its own sessions' counts); nothing about other users, the store or the traffic.
    func json(restrictedTo own: (sessions: Int, outbox: Int, inbox: Int)) -> String {
        var json = JSONWriter()
        json.beginObject()
        json.beginObject("counters")
        json.field("link_connect_attempts_total", connectAttempts)
        json.field("link_reconnects_total", reconnects)
        json.endObject()
        json.beginObject("gauges")
        json.field("link_up", linkUp ? 1 : 0)
        if let rtt { json.field("link_rtt_seconds", rtt.seconds) }
        if linkUp, let heartbeatInterval { json.field("heartbeat_interval_seconds", heartbeatInterval.seconds) }
        json.field("sessions", own.sessions)
        json.field("outbox_messages", own.outbox)
        json.field("inbox_messages", own.inbox)
        json.endObject()
        json.endObject()
        return json.text
    }

    /// METRICS' document: the same metrics under the same names (without the
    /// `imagentd_` prefix) by type, and the whole exposition text as `prometheus`.
    func json(histograms metrics: DaemonMetrics) -> String {
        var json = JSONWriter()
        json.beginObject()
        json.beginObject("counters")
        json.field("link_connect_attempts_total", connectAttempts)
        json.field("link_reconnects_total", reconnects)
        json.field("link_sent_frames_total", traffic.framesOut)
        json.field("link_received_frames_total", traffic.framesIn)
        json.field("link_sent_bytes_total", traffic.bytesOut)
        json.field("link_received_bytes_total", traffic.bytesIn)
        json.field("messages_expired_total", messagesExpired)
        json.field("store_failures_total", storeFailures)
        json.endObject()
        json.beginObject("gauges")
        json.field("link_up", linkUp ? 1 : 0)
        if let rtt { json.field("link_rtt_seconds", rtt.seconds) }
        if linkUp, let heartbeatInterval { json.field("heartbeat_interval_seconds", heartbeatInterval.seconds) }
        json.field("ipc_clients", ipcClients)
        json.field("sessions", sessions)
        json.field("outbox_messages", outboxMessages)
        json.field("inbox_messages", inboxMessages)
        json.field("outbox_bytes", outboxBytes)
        json.field("store_memory_bytes", windowBytes)
        json.field("store_database_bytes", storeDatabaseBytes)
        json.field("store_wal_bytes", storeWALBytes)
        json.endObject()
        json.beginObject("histograms")
        json.beginObject("link_handshake_stage_seconds")
        for stage in ConnectStage.allCases {
            let total = metrics.stageTotals[stage] ?? (0, .zero)
            json.beginObject("\(stage)")
            json.field("count", total.count)
            json.field("sum", total.sum.seconds)
            json.endObject()
        }
        json.endObject()
        json.endObject()
        json.field("prometheus", String(decoding: metrics.exposition(), as: UTF8.self))
        json.endObject()
        return json.text
    }
}
