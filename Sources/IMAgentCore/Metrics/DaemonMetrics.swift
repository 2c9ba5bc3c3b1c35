import Prometheus

/// Every metric imagentd exports, in one Prometheus registry: the same set
/// for the `[metrics] prometheus_listen` endpoint, IPC METRICS and
/// `imagent metrics`. Names follow Prometheus' conventions (`imagentd_`
/// prefix, `_total` counters, base units `_seconds` and `_bytes`), each with
/// HELP and TYPE; imagentd(8) lists them.
///
/// Gauges are read from the daemon when a scrape asks (`DaemonCore`),
/// counters and histograms are recorded where things happen. Used on the
/// daemon's event loop; the registry itself is thread-safe.
final class DaemonMetrics {
    let registry = PrometheusCollectorRegistry()

    // Link.
    let linkUp: Gauge
    let linkAttempts: MirroredCounter
    let linkReconnects: MirroredCounter
    let framesSent: MirroredCounter
    let framesReceived: MirroredCounter
    let bytesSent: MirroredCounter
    let bytesReceived: MirroredCounter
    /// Time spent in each connect stage that led to the next one (token … login).
    private let stageDurations: [ConnectStage: DurationHistogram]

    // Local side.
    let ipcClients: Gauge
    let sessions: Gauge
    let outboxMessages: Gauge
    let inboxMessages: Gauge
    let outboxBytes: Gauge
    let windowBytes: Gauge
    let messagesExpired: MirroredCounter
    let storeFailures: MirroredCounter
    let storeDatabaseBytes: Gauge
    let storeWALBytes: Gauge

    /// Gauges exported only while their value is known (`setKnown`).
    private var knownGauges: [String: Gauge] = [:]

    init(version: String, startedAtUnixMS: UInt64) {
        let registry = self.registry
        registry.gauge("imagentd_build_info", labels: [("version", version)],
                           help: "Always 1; the label says which imagentd runs.").set(to: 1)
        registry.gauge("imagentd_start_time_seconds", help: "When imagentd started, in seconds since the Unix epoch.")
            .set(to: Double(startedAtUnixMS) / 1000)
        linkUp = registry.gauge("imagentd_link_up", help: "1 while the link is connected (after LOGIN_OK), else 0.")
        linkAttempts = MirroredCounter(registry.counter("imagentd_link_connect_attempts_total",
                                                            help: "Connection attempts started since imagentd started."))
        linkReconnects = MirroredCounter(registry.counter("imagentd_link_reconnects_total",
                                                              help: "Links established after the first one."))
        framesSent = MirroredCounter(registry.counter("imagentd_link_sent_frames_total", help: "IMLink frames written on the link."))
        framesReceived = MirroredCounter(registry.counter("imagentd_link_received_frames_total",
                                                          help: "IMLink frames read from the link."))
        bytesSent = MirroredCounter(registry.counter("imagentd_link_sent_bytes_total",
                                                     help: "IMLink bytes written on the link (inside TLS)."))
        bytesReceived = MirroredCounter(registry.counter("imagentd_link_received_bytes_total",
                                                         help: "IMLink bytes read from the link (inside TLS)."))
        let buckets: [Duration] = [.milliseconds(1), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
                                   .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500),
                                   .seconds(5), .seconds(10)]
        stageDurations = Dictionary(uniqueKeysWithValues: ConnectStage.allCases.map { stage in
            (stage, registry.durationHistogram("imagentd_link_handshake_stage_seconds", labels: [("stage", "\(stage)")],
                                                   buckets: buckets,
                                                   help: "Time each connect stage took, for stages that led to the next one."))
        })
        ipcClients = registry.gauge("imagentd_ipc_clients", help: "Local clients connected that sent HELLO.")
        sessions = registry.gauge("imagentd_sessions", help: "Open sessions, attached or not.")
        outboxMessages = registry.gauge("imagentd_outbox_messages",
                                            help: "Outbound messages accepted and not yet acknowledged by the server.")
        inboxMessages = registry.gauge("imagentd_inbox_messages",
                                           help: "Inbound messages stored and not yet acknowledged by a local client.")
        messagesExpired = MirroredCounter(registry.counter("imagentd_messages_expired_total",
                                                               help: "Outbound messages given up (TTL passed or too large for the server)."))
        outboxBytes = registry.gauge("imagentd_outbox_bytes", help: "Payload bytes of the outbound messages queued (in the store).")
        windowBytes = registry.gauge("imagentd_store_memory_bytes",
                                     help: "Payload bytes held in memory: what is on the link unacknowledged, read ahead, or waiting for a client.")
        storeFailures = MirroredCounter(registry.counter("imagentd_store_failures_total",
                                                         help: "Local store failures (disk, database) that dropped the link; the server was not blamed."))
        storeDatabaseBytes = registry.gauge("imagentd_store_database_bytes", help: "Size of the SQLite database file.")
        storeWALBytes = registry.gauge("imagentd_store_wal_bytes", help: "Size of the SQLite write-ahead log.")
    }

    /// Sets gauge `name` to `value`, or removes it while the value is unknown (an RTT
    /// before the first sample is no RTT of 0).
    func setKnown(_ name: String, help: String, to value: Double?) {
        switch (value, knownGauges[name]) {
        case (let value?, let gauge?):
            gauge.set(to: value)
        case (let value?, nil):
            let gauge = registry.gauge(name, help: help)
            gauge.set(to: value)
            knownGauges[name] = gauge
        case (nil, let gauge?):
            registry.unregisterGauge(gauge)
            knownGauges[name] = nil
        case (nil, nil):
            break
        }
    }

    /// A connect stage ended in the next stage (or LOGIN_OK) after `duration`.
    func stageCompleted(_ stage: ConnectStage, after duration: Duration) {
        stageDurations[stage]?.record(duration)
        let total = stageTotals[stage, default: (0, .zero)]
        stageTotals[stage] = (total.count + 1, total.sum + duration)
    }

    /// Count and sum of each stage's histogram, for METRICS' JSON.
    private(set) var stageTotals: [ConnectStage: (count: Int, sum: Duration)] = [:]

    /// The Prometheus text exposition format, version 0.0.4.
    func exposition() -> [UInt8] {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(8192)
        registry.emit(into: &buffer)
        return buffer
    }
}

/// A counter whose value is kept elsewhere as a running total (the link's
/// attempt count): each refresh adds what the total grew by, so the exported
/// counter never goes down and equals the total.
final class MirroredCounter {
    let counter: Counter
    private(set) var value = 0

    init(_ counter: Counter) { self.counter = counter }

    func update(to total: Int) {
        guard total > value else { return }
        counter.increment(by: Int64(total - value))
        value = total
    }
}

/// The registry's makers with the whole name given (`imagentd_…_seconds`) and its HELP text.
private extension PrometheusCollectorRegistry {
    func gauge(_ name: String, labels: [(String, String)] = [], help: String) -> Gauge {
        makeGauge(descriptor: MetricNameDescriptor(metricName: name, unitName: "", helpText: help), labels: labels)
    }

    func counter(_ name: String, help: String) -> Counter {
        makeCounter(descriptor: MetricNameDescriptor(metricName: name, unitName: "", helpText: help))
    }

    func durationHistogram(_ name: String, labels: [(String, String)], buckets: [Duration], help: String) -> DurationHistogram {
        makeDurationHistogram(descriptor: MetricNameDescriptor(metricName: name, unitName: "", helpText: help),
                              labels: labels, buckets: buckets)
    }
}
