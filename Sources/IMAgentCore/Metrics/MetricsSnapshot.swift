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
    /// SENDs accepted; inbound messages stored; DATA written again on a later link; MESSAGEs handed to a client again.
    var messagesAccepted: Int
    var messagesReceived: Int
    var messagesResent: Int
    var messagesRedelivered: Int
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
        for (cause, counter) in metrics.reconnectsByCause { counter.update(to: traffic.reconnects[cause] ?? 0) }
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
        metrics.messagesAccepted.update(to: messagesAccepted)
        metrics.messagesReceived.update(to: messagesReceived)
        metrics.messagesResent.update(to: messagesResent)
        metrics.messagesRedelivered.update(to: messagesRedelivered)
        metrics.storeDatabaseBytes.set(to: Double(storeDatabaseBytes))
        metrics.storeWALBytes.set(to: Double(storeWALBytes))
    }

    /// METRICS' document: the metrics under their exported names without the
    /// `imagentd_` prefix, by type (a labelled one as an object by label value,
    /// a histogram as its count and sum), and the whole exposition text as
    /// `prometheus`. For a client that is not an admin (`own` given): the link's
    /// counters and gauges and its own sessions' figures only; nothing about other
    /// users, the store or the traffic (whose volume is every user's activity), no
    /// histograms.
    func json(_ metrics: DaemonMetrics, restrictedTo own: (sessions: Int, outbox: Int, inbox: Int, outboxBytes: Int)? = nil) -> String {
        let admin = own == nil
        var json = JSONWriter()
        json.beginObject()
        json.beginObject("counters")
        json.field("link_connect_attempts_total", connectAttempts)
        json.field("link_reconnects_total", reconnects)
        json.beginObject("link_reconnects_by_cause_total")
        for cause in ReconnectCause.allCases { json.field(cause.rawValue, traffic.reconnects[cause] ?? 0) }
        json.endObject()
        if admin {
            json.field("link_sent_frames_total", traffic.framesOut)
            json.field("link_received_frames_total", traffic.framesIn)
            json.field("link_sent_bytes_total", traffic.bytesOut)
            json.field("link_received_bytes_total", traffic.bytesIn)
            json.field("messages_expired_total", messagesExpired)
            json.field("messages_accepted_total", messagesAccepted)
            json.field("messages_received_total", messagesReceived)
            json.field("messages_resent_total", messagesResent)
            json.field("messages_redelivered_total", messagesRedelivered)
            json.field("store_failures_total", storeFailures)
        }
        json.endObject()
        json.beginObject("gauges")
        json.beginObject("build_info")
        json.field(metrics.version, 1)
        json.endObject()
        json.field("start_time_seconds", metrics.startTimeSeconds)
        json.field("link_up", linkUp ? 1 : 0)
        if let rtt { json.field("link_rtt_seconds", rtt.seconds) }
        if linkUp, let heartbeatInterval { json.field("heartbeat_interval_seconds", heartbeatInterval.seconds) }
        if admin { json.field("ipc_clients", ipcClients) }
        json.field("sessions", own?.sessions ?? sessions)
        json.field("outbox_messages", own?.outbox ?? outboxMessages)
        json.field("inbox_messages", own?.inbox ?? inboxMessages)
        json.field("outbox_bytes", own?.outboxBytes ?? outboxBytes)
        if admin {
            json.field("store_memory_bytes", windowBytes)
            json.field("store_database_bytes", storeDatabaseBytes)
            json.field("store_wal_bytes", storeWALBytes)
        }
        json.endObject()
        if admin {
            json.beginObject("histograms")
            json.beginObject("link_handshake_stage_seconds")
            for stage in ConnectStage.allCases {
                if let histogram = metrics.stageDurations[stage] { Self.write(histogram, as: "\(stage)", into: &json) }
            }
            json.endObject()
            Self.write(metrics.roundTrips, as: "link_round_trip_seconds", into: &json)
            Self.write(metrics.sendAckLatency, as: "send_ack_seconds", into: &json)
            Self.write(metrics.storeCommitDurations, as: "store_commit_seconds", into: &json)
            json.beginObject("store_commit_operations")
            json.field("count", metrics.storeCommitOperations.count)
            json.field("sum", metrics.storeCommitOperations.sum)
            json.endObject()
            json.endObject()
            json.field("prometheus", String(decoding: metrics.exposition(), as: UTF8.self))
        }
        json.endObject()
        return json.text
    }

    private static func write(_ histogram: CountedHistogram<Duration>, as name: String, into json: inout JSONWriter) {
        json.beginObject(name)
        json.field("count", histogram.count)
        json.field("sum", histogram.sum.seconds)
        json.endObject()
    }
}
