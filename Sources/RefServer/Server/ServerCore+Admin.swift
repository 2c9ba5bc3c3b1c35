import IMLink
import JSONText
import NIOCore

/// The admin commands: every fault knob and the `stats` report.
extension ServerCore {
    /// Carries out `command` and returns its one-line reply ("ok …" or "error …").
    func execute(_ command: AdminCommand) -> String {
        loop.preconditionInEventLoop()
        switch command {
        case .goaway(let code, let retryAfterMS, let redirect):
            let goaway = Frame.goaway(Goaway(code: code, message: "requested by the goaway command",
                                             retryAfterMS: retryAfterMS, redirect: redirect))
            let handlers = Array(connections.values)
            for handler in handlers {
                handler.write(goaway)
                handler.flush()
            }
            loop.assumeIsolated().scheduleTask(in: configuration.goawayGrace) {
                for handler in handlers { handler.closeSilently() }
            }
            return "ok goaway \(code) sent to \(handlers.count) connections"
        case .failLogin(let code, let retryAfterMS, let count):
            knobs.failLogin = count > 0 ? Knobs.FailLogin(code: code, retryAfterMS: retryAfterMS, remaining: count) : nil
            return "ok the next \(count) logins fail with \(code)"
        case .drop:
            let handlers = Array(connections.values)
            for handler in handlers { handler.closeSilently() }
            return "ok dropped \(handlers.count) connections"
        case .dropAfter(let frames):
            for handler in connections.values { handler.framesUntilDrop = frames }
            return "ok \(connections.count) connections close after \(frames) more frames"
        case .dropOnData(let session):
            knobs.dropOnDataSession = session
            return session.map { "ok connections close when DATA of session \($0) arrives" } ?? "ok drop-on-data off"
        case .stall(let on):
            knobs.stalled = on
            if !on {
                for handler in connections.values { handler.resumeReading() }
            }
            return on ? "ok stalled: not reading from any socket" : "ok reading again"
        case .natTimeout(let timeout):
            knobs.natTimeout = timeout
            startSweep()
            return timeout.map { "ok nat-timeout \(Double($0.nanoseconds) / 1e9) s" } ?? "ok nat-timeout off"
        case .heartbeat(let ms):
            knobs.heartbeatMS = ms
            startSweep()
            return "ok heartbeat \(ms) ms for future logins"
        case .advertiseHeartbeat(let ms):
            knobs.advertisedHeartbeatMS = ms
            return ms.map { "ok future LOGIN_OKs advertise HEARTBEAT_MS \($0)" } ?? "ok LOGIN_OKs advertise the real heartbeat"
        case .push(let target, let count, let size, let rate):
            let keys = book.sessions.values.filter { session in
                switch target {
                case .all: session.attachment != nil
                case .session(let id): session.key.id == id
                }
            }.map(\.key).sorted()
            guard !keys.isEmpty else { return "error no session matches \(target)" }
            for key in keys { startPush(key, count: count, size: size, rate: rate) }
            return "ok pushing \(count) messages of \(size) bytes to \(keys.count) sessions"
        case .stats:
            return "ok " + statsJSON()
        case .help:
            return "ok commands: goaway, fail-login, drop, drop-after, drop-on-data, stall, nat-timeout, heartbeat, advertise-heartbeat, push, stats, help"
        }
    }

    /// One line of JSON: counters, knobs, and every session's sequence numbers.
    func statsJSON() -> String {
        var json = JSONWriter()
        json.beginObject()
        json.field("connections", connections.count)
        json.field("established", connections.values.filter { $0.negotiated != nil }.count)
        json.field("connections_accepted", statistics.connectionsAccepted)
        json.field("logins", statistics.loginsAccepted)
        json.field("logins_rejected", statistics.loginsRejected)
        json.field("sessions", book.sessions.count)
        json.field("sessions_open", book.sessions.values.filter { $0.attachment != nil }.count)
        json.field("sessions_closed", book.closed.count)
        json.field("frames_in", statistics.framesIn)
        json.field("frames_out", statistics.framesOut)
        json.field("messages_in", statistics.messagesIn)
        json.field("messages_out", statistics.messagesOut)
        json.field("protocol_errors", statistics.protocolErrors)
        json.field("stalled", knobs.stalled)
        json.field("heartbeat_ms", knobs.heartbeatMS)
        json.beginArray("session_seqs")
        for session in book.sessions.values.sorted(by: { $0.key < $1.key }) {
            json.beginObject()
            json.field("agent", session.key.agent)
            json.field("session", session.key.id)
            json.field("service", session.service.rawValue)
            json.field("open", session.attachment != nil)
            json.field("in_last", session.inboundLast)
            json.field("out_last", session.outboundLast)
            json.field("out_acked", session.outboundAcked)
            json.field("out_sent", session.attachment?.sentThrough ?? session.outboundAcked)
            json.endObject()
        }
        json.endArray()
        json.endObject()
        return json.text
    }
}
