import IMLink
import JSONText

/// What WATCH sends and EVENTS shows: each event as one JSON document, recorded in the
/// history (`EventRing`: link and reload events for everyone, a session's events for its
/// owner and admins) and handed back for the watchers. Heartbeat changes go to watchers
/// only: they come often, and would push the link's history out.
struct EventFeed {
    private var history = EventRing()

    /// A link transition, as the engine reported it.
    mutating func link(_ transition: LinkTransition, now: MonotonicInstant, nowMS: UInt64) -> String {
        var event = JSONWriter()
        event.beginObject()
        event.field("event", "link")
        event.field("time_ms", nowMS)
        event.field("state", transition.status.state)
        event.field("detail", transition.status.sentence(now: now))
        event.field("reason", transition.reason)
        event.endObject()
        history.append(.init(timeMS: nowMS, owner: nil, json: event.text))
        return event.text
    }

    /// A session was opened, attached, detached, closed or changed state.
    mutating func session(_ change: SessionChange, nowMS: UInt64) -> String {
        var event = JSONWriter()
        event.beginObject()
        event.field("event", "session")
        event.field("time_ms", nowMS)
        event.field("change", change.kind.rawValue)
        event.field("session", change.session)
        event.field("service", change.service)
        event.field("owner", change.owner)
        event.field("state", change.state.description)
        event.field("reason", change.reason)
        event.endObject()
        history.append(.init(timeMS: nowMS, owner: change.owner, json: event.text))
        return event.text
    }

    /// The configuration was reloaded.
    mutating func reload(_ report: ReloadReport, nowMS: UInt64) -> String {
        var event = JSONWriter()
        event.beginObject()
        event.field("event", "reload")
        event.field("time_ms", nowMS)
        event.raw("report", report.json)
        event.endObject()
        history.append(.init(timeMS: nowMS, owner: nil, json: event.text))
        return event.text
    }

    /// The heartbeat interval changed (not recorded).
    static func heartbeat(interval: Duration, rtt: Duration?, nowMS: UInt64) -> String {
        var event = JSONWriter()
        event.beginObject()
        event.field("event", "heartbeat")
        event.field("time_ms", nowMS)
        event.field("interval_s", interval.seconds)
        event.field("rtt_ms", rtt.map(\.milliseconds))
        event.endObject()
        return event.text
    }

    /// EVENTS' answer: the history `uid` may see.
    func historyJSON(for uid: UInt32, isAdmin: Bool) -> String {
        #"{"events":["# + history.visible(to: uid, isAdmin: isAdmin).map(\.json).joined(separator: ",") + "]}"
    }
}
