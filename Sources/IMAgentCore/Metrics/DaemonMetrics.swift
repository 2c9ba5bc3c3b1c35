import AgentStore
import IMLink
import Prometheus
import Synchronization

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
    /// Links established after a lost one, by what ended it (`ReconnectCause`).
    let reconnectsByCause: [ReconnectCause: MirroredCounter]
    /// Time spent in each connect stage that led to the next one (token … login).
    let stageDurations: [ConnectStage: CountedHistogram<Duration>]
    /// Every RTT sample: HELLO→HELLO_OK and PING→PONG.
    let roundTrips: CountedHistogram<Duration>

    // Local side.
    let ipcClients: Gauge
    let sessions: Gauge
    let outboxMessages: Gauge
    let inboxMessages: Gauge
    let outboxBytes: Gauge
    let windowBytes: Gauge
    let messagesExpired: MirroredCounter
    let messagesAccepted: MirroredCounter
    let messagesReceived: MirroredCounter
    let messagesResent: MirroredCounter
    let messagesRedelivered: MirroredCounter
    /// From a SEND's ACCEPTED to the server's ACK of it.
    let sendAckLatency: CountedHistogram<Duration>
    /// Each store transaction: its time (BEGIN to the end of COMMIT) and its operations.
    let storeCommitDurations: CountedHistogram<Duration>
    let storeCommitOperations: CountedHistogram<Double>
    let storeFailures: MirroredCounter
    let storeDatabaseBytes: Gauge
    let storeWALBytes: Gauge

    /// Gauges exported only while their value is known (`setKnown`).
    private var knownGauges: [String: Gauge] = [:]

    /// `imagentd_build_info`'s label and `imagentd_start_time_seconds`, for METRICS' JSON.
    let version: String
    let startTimeSeconds: Double

    init(version: String, startedAtUnixMS: UInt64 = UInt64(WallClock.nowMS())) {
        self.version = version
        startTimeSeconds = Double(startedAtUnixMS) / 1000
        let registry = self.registry
        registry.gauge("imagentd_build_info", labels: [("version", version)],
                           help: "Always 1; the label says which imagentd runs.").set(to: 1)
        registry.gauge("imagentd_start_time_seconds", help: "When imagentd started, in seconds since the Unix epoch.")
            .set(to: startTimeSeconds)
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
        reconnectsByCause = Dictionary(uniqueKeysWithValues: ReconnectCause.allCases.map { cause in
            (cause, MirroredCounter(registry.counter("imagentd_link_reconnects_by_cause_total", labels: [("cause", cause.rawValue)],
                                                     help: "Links established after a lost one, by what ended the lost one.")))
        })
        stageDurations = Dictionary(uniqueKeysWithValues: ConnectStage.allCases.map { stage in
            (stage, CountedHistogram(registry.durationHistogram("imagentd_link_handshake_stage_seconds", labels: [("stage", "\(stage)")],
                                                                buckets: buckets,
                                                                help: "Time each connect stage took, for stages that led to the next one.")))
        })
        roundTrips = CountedHistogram(registry.durationHistogram("imagentd_link_round_trip_seconds", labels: [], buckets: buckets,
                                                                 help: "Round-trip time samples: HELLO to HELLO_OK, PING to PONG."))
        ipcClients = registry.gauge("imagentd_ipc_clients", help: "Local clients connected that sent HELLO.")
        sessions = registry.gauge("imagentd_sessions", help: "Open sessions, attached or not.")
        outboxMessages = registry.gauge("imagentd_outbox_messages",
                                            help: "Outbound messages accepted and not yet acknowledged by the server.")
        inboxMessages = registry.gauge("imagentd_inbox_messages",
                                           help: "Inbound messages stored and not yet acknowledged by a local client.")
        messagesExpired = MirroredCounter(registry.counter("imagentd_messages_expired_total",
                                                               help: "Outbound messages given up (TTL passed or too large for the server)."))
        messagesAccepted = MirroredCounter(registry.counter("imagentd_messages_accepted_total",
                                                            help: "Outbound messages accepted from local clients (stored, ACCEPTED sent)."))
        messagesReceived = MirroredCounter(registry.counter("imagentd_messages_received_total",
                                                            help: "Inbound messages from the server stored (duplicates not counted)."))
        messagesResent = MirroredCounter(registry.counter("imagentd_messages_resent_total",
                                                          help: "Outbound DATA written again on a later link (the server had not acknowledged it)."))
        messagesRedelivered = MirroredCounter(registry.counter("imagentd_messages_redelivered_total",
                                                               help: "Inbound MESSAGEs handed to a client again (it had not acknowledged them)."))
        sendAckLatency = CountedHistogram(registry.durationHistogram("imagentd_send_ack_seconds", labels: [], buckets: buckets,
                                                                     help: "Time from a SEND's ACCEPTED to the server's ACK of the message."))
        storeCommitDurations = CountedHistogram(registry.durationHistogram(
            "imagentd_store_commit_seconds", labels: [],
            buckets: [.microseconds(100), .microseconds(250), .microseconds(500)] + buckets,
            help: "Time of each store transaction, BEGIN to the end of COMMIT (the fsync included at durability power)."))
        storeCommitOperations = CountedHistogram(registry.makeValueHistogram(
            descriptor: MetricNameDescriptor(metricName: "imagentd_store_commit_operations", unitName: "",
                                             helpText: "Operations (messages stored, acknowledgements, …) in each store transaction."),
            buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]))
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
    }

    /// Hears the store's commits (on its writer thread): the histograms are thread-safe.
    var storeCommitObserver: StoreCommitObserver {
        { [storeCommitDurations, storeCommitOperations] duration, operations in
            storeCommitDurations.record(duration)
            storeCommitOperations.record(Double(operations))
        }
    }

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

/// A registry histogram that also keeps its count and sum, which the library
/// does not expose, for METRICS' JSON. Thread-safe, as the store's writer thread records too.
final class CountedHistogram<Value: Bucketable>: Sendable {
    private let histogram: Histogram<Value>
    private let totals = Mutex((count: 0, sum: Value.zero))

    init(_ histogram: Histogram<Value>) { self.histogram = histogram }

    func record(_ value: Value) {
        histogram.record(value)
        totals.withLock { $0 = ($0.count + 1, $0.sum + value) }
    }

    var count: Int { totals.withLock { $0.count } }
    var sum: Value { totals.withLock { $0.sum } }
}

/// The registry's makers with the whole name given (`imagentd_…_seconds`) and its HELP text.
private extension PrometheusCollectorRegistry {
    func gauge(_ name: String, labels: [(String, String)] = [], help: String) -> Gauge {
        makeGauge(descriptor: MetricNameDescriptor(metricName: name, unitName: "", helpText: help), labels: labels)
    }

    func counter(_ name: String, labels: [(String, String)] = [], help: String) -> Counter {
        makeCounter(descriptor: MetricNameDescriptor(metricName: name, unitName: "", helpText: help), labels: labels)
    }

    func durationHistogram(_ name: String, labels: [(String, String)], buckets: [Duration], help: String) -> DurationHistogram {
        makeDurationHistogram(descriptor: MetricNameDescriptor(metricName: name, unitName: "", helpText: help),
                              labels: labels, buckets: buckets)
    }
}
