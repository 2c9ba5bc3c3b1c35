import AgentIPC
import ArgumentParser

/// `imagent status`: the link, the daemon and the queues at a glance.
struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the link's state, server, uptime, RTT, heartbeat, reconnects, what an MQTT broker granted, sessions and queue depths.",
        discussion: "With --json, prints imagentd's STATUS document as one line of JSON.")

    @OptionGroup var options: GlobalOptions

    func run() async throws {
        let text = try await options.withClient(for: "status") { try await $0.status() }
        let status = try DaemonDocument.parse(text, from: .status)
        if options.json {
            Output.line(status.compactText)
        } else {
            Output.lines(Self.render(status))
        }
    }

    /// The human form. Fields the daemon leaves out read "-"; fields this
    /// version does not know are listed after the known ones.
    static func render(_ status: JSONValue) -> [String] {
        let link = status["link"], daemon = status["daemon"], sessions = status["sessions"]
        var fields = FieldList()

        // "detail" is the daemon's sentence for the state ("reconnecting in 4 s (connection refused)");
        // an older daemon's detail only says where a connect attempt stands ("resolving").
        let state = link["state"].displayText
        let detail = link["detail"].flatMap { $0 == .null ? nil : $0.displayText }
        fields.add("link", detail.map { sentence in
            sentence.hasPrefix(state) || ["waiting", "stopped", "unconfigured"].contains(state) ? sentence : "\(state) (\(sentence))"
        } ?? state)
        if let next = link["next_step"], next != .null { fields.add("next", next.displayText) }
        fields.add("server", link["endpoint"].displayText)
        if let since = link["connected_since_ms"], since != .null {
            fields.add("connected", "since \(HumanFormat.timestamp(milliseconds: since)), "
                + "up \(HumanFormat.duration(seconds: link["uptime_s"]))")
        } else {
            fields.add("connected", "-")
        }
        fields.add("rtt", HumanFormat.quantity(link["rtt_ms"], unit: "ms"))
        fields.add("heartbeat", link["heartbeat_s"].flatMap { $0 == .null ? nil : "every " + HumanFormat.quantity($0, unit: "s") } ?? "-")
        fields.add("reconnects", link["reconnects"].displayText)
        var lastError = link["last_error"].displayText
        if let at = link["last_error_ms"], at != .null, lastError != "-" {
            lastError += " (at \(HumanFormat.timestamp(milliseconds: at)))"
        }
        fields.add("last error", lastError)
        if let grant = link["mqtt_broker"], grant != .null { BrokerGrantText.add(grant, to: &fields) }
        fields.addUnknown(of: link, known: ["state", "detail", "next_step", "endpoint", "endpoints", "connected_since_ms", "uptime_s",
                                            "rtt_ms", "heartbeat_s", "reconnects", "last_error", "last_error_ms",
                                            "unconfigured", "attempts", "server_clock_offset_ms",
                                            "server_certificate_expires_ms", "mqtt_broker"], prefix: "link")

        fields.add("daemon", "imagentd \(daemon["version"].displayText), pid \(daemon["pid"].displayText), "
            + "up \(HumanFormat.duration(seconds: daemon["uptime_s"]))"
            + (daemon["clients"].map { ", clients \($0.displayText)" } ?? ""))
        fields.addUnknown(of: daemon, known: ["version", "pid", "uptime_s", "clients"], prefix: "daemon")

        fields.add("sessions", sessions["count"].displayText)
        let outboxBytes = sessions["outbox_bytes"].map { " (\(HumanFormat.bytes($0)))" } ?? ""
        fields.add("outbox", "\(sessions["outbox"].displayText) messages\(outboxBytes) waiting for the server")
        fields.add("inbox", "\(sessions["inbox"].displayText) messages waiting for clients")
        addFailed(sessions, to: &fields)
        fields.addUnknown(of: sessions, known: ["count", "outbox", "outbox_bytes", "inbox", "owner", "failed", "failed_sessions",
                                                "refused_total", "quarantined_total"], prefix: "sessions")

        if let store = status["store"] {
            fields.add("store", "\(store["path"].displayText), \(HumanFormat.bytes(store["db_bytes"])) "
                + "(write-ahead log \(HumanFormat.bytes(store["wal_bytes"])))")
            if let memory = store["memory_bytes"] {
                fields.add("memory", "\(HumanFormat.bytes(memory)) of payloads in memory, "
                    + "budget \(HumanFormat.bytes(store["memory_budget_bytes"]))")
            }
            if let failures = store["failures"], failures.displayText != "0" {
                var text = "\(failures.displayText) store failures, last: \(store["last_error"].displayText)"
                if let at = store["last_error_ms"], at != .null { text += " (at \(HumanFormat.timestamp(milliseconds: at)))" }
                fields.add("store error", text)
            }
            fields.addUnknown(of: store, known: ["path", "db_bytes", "wal_bytes", "memory_bytes", "memory_budget_bytes",
                                                 "failures", "last_error", "last_error_ms"], prefix: "store")
        }
        for member in status.members ?? [] where !["link", "daemon", "sessions", "store"].contains(member.key) {
            if member.value.members != nil {
                fields.addUnknown(of: member.value, known: [], prefix: member.key)
            } else {
                fields.add(member.key, member.value.displayText)
            }
        }
        return fields.lines
    }

    /// Failed sessions (refused by the server, or quarantined), each with its reason; nothing while there are none.
    private static func addFailed(_ sessions: JSONValue?, to fields: inout FieldList) {
        let failed = sessions["failed"].displayText
        let totals = [("refused_total", "refused by the server"), ("quarantined_total", "quarantined")]
            .compactMap { key, text in sessions[key].map { (count: $0.displayText, text: text) } }
        guard failed != "0" && failed != "-" || totals.contains(where: { $0.count != "0" }) else { return }
        let since = totals.isEmpty ? "" : "; since start " + totals.map { "\($0.count) \($0.text)" }.joined(separator: ", ")
        fields.add("failed", "\(failed) sessions\(since)")
        for session in sessions["failed_sessions"]?.elements ?? [] {
            fields.add("failed session", "\(session["session"].displayText) (\(session["service"].displayText)): \(session["reason"].displayText)")
        }
    }
}
