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
        record("link", owner: nil, nowMS: nowMS) { event in
            event.field("state", transition.status.state)
            event.field("detail", transition.status.sentence(now: now))
            event.field("reason", transition.reason)
        }
    }

    /// A session was opened, attached, detached, closed or changed state: its owner's and admins'.
    mutating func session(_ change: SessionChange, nowMS: UInt64) -> String {
        record("session", owner: change.owner, nowMS: nowMS) { event in
            event.field("change", change.kind.rawValue)
            event.field("session", change.session)
            event.field("service", change.service)
            event.field("owner", change.owner)
            event.field("state", change.state.description)
            event.field("reason", change.reason)
        }
    }

    /// The configuration was reloaded.
    mutating func reload(_ report: ReloadReport, nowMS: UInt64) -> String {
        record("reload", owner: nil, nowMS: nowMS) { $0.raw("report", report.json) }
    }

    /// The heartbeat interval changed (not recorded).
    static func heartbeat(interval: Duration, rtt: Duration?, nowMS: UInt64) -> String {
        document("heartbeat", nowMS: nowMS) { event in
            event.field("interval_s", interval.seconds)
            event.field("rtt_ms", rtt.map(\.milliseconds))
        }
    }

    /// An event of `kind` with the fields `body` writes, kept in the history for `owner` (nil: everyone).
    private mutating func record(_ kind: String, owner: UInt32?, nowMS: UInt64, _ body: (inout JSONWriter) -> Void) -> String {
        let text = Self.document(kind, nowMS: nowMS, body)
        history.append(.init(timeMS: nowMS, owner: owner, json: text))
        return text
    }

    private static func document(_ kind: String, nowMS: UInt64, _ body: (inout JSONWriter) -> Void) -> String {
        var event = JSONWriter()
        event.beginObject()
        event.field("event", kind)
        event.field("time_ms", nowMS)
        body(&event)
        event.endObject()
        return event.text
    }

    /// EVENTS' answer: the history `uid` may see.
    func historyJSON(for uid: UInt32, isAdmin: Bool) -> String {
        #"{"events":["# + history.visible(to: uid, isAdmin: isAdmin).map(\.json).joined(separator: ",") + "]}"
    }
}
