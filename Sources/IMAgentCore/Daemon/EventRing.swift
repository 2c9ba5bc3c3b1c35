import NIOCore

/// The daemon's recent events, for `imagent events` (the EVENTS request).
/// Link and reload events, which everyone sees, are kept apart from session
/// events, which their owner and admins see, so no user's sessions push the
/// link's history out; and each uid's share of the session events is bounded,
/// so one uid's churn cannot push out another uid's events. Every event is at
/// most `maxEventBytes` of JSON, so memory stays bounded however busy the
/// link or the sessions are. WATCH shows what happens from now on; this is
/// what happened before.
struct EventRing {
    struct Entry: Equatable {
        var timeMS: UInt64
        /// The session's owner for a session event (shown to that uid and admins only); nil: everyone's.
        var owner: UInt32?
        /// The EVENT document, as WATCH sends it.
        var json: String
    }

    /// How many events are kept.
    struct Capacity: Equatable {
        /// Link and reload events, which everyone sees.
        var link = 256
        /// Session events of one uid.
        var perUID = 64
        /// Session events of all uids together.
        var sessions = 512
    }

    /// An entry and its place in the order of arrival, for merging the rings.
    private struct Numbered {
        var order: UInt64
        var entry: Entry
    }

    let capacity: Capacity
    let maxEventBytes: Int
    private var linkEvents = CircularBuffer<Numbered>()
    private var byOwner: [UInt32: CircularBuffer<Numbered>] = [:]
    private var sessionEvents = 0
    private var nextOrder: UInt64 = 0

    init(capacity: Capacity = Capacity(), maxEventBytes: Int = 2_048) {
        precondition(capacity.link > 0 && capacity.perUID > 0 && capacity.sessions >= capacity.perUID)
        self.capacity = capacity
        self.maxEventBytes = maxEventBytes
    }

    mutating func append(_ entry: Entry) {
        var entry = entry
        if entry.json.utf8.count > maxEventBytes {
            // An event with an outsized reason (a long server message) keeps its time and kind only.
            entry.json = #"{"event":"truncated","time_ms":\#(entry.timeMS)}"#
        }
        let numbered = Numbered(order: nextOrder, entry: entry)
        nextOrder += 1
        guard let owner = entry.owner else {
            if linkEvents.count == capacity.link { linkEvents.removeFirst() }
            linkEvents.append(numbered)
            return
        }
        if byOwner[owner, default: []].count == capacity.perUID {
            dropOldest(of: owner)
        } else if sessionEvents == capacity.sessions, let largest = largestShare() {
            dropOldest(of: largest)
        }
        byOwner[owner, default: []].append(numbered)
        sessionEvents += 1
    }

    /// The uid holding the most session events (of those, the one with the oldest event):
    /// when all uids together reach the bound, it gives up its oldest, so a uid within a
    /// fair share keeps its events however many others churn.
    private func largestShare() -> UInt32? {
        byOwner.max { a, b in
            a.value.count != b.value.count ? a.value.count < b.value.count
                : a.value.first!.order > b.value.first!.order
        }?.key
    }

    private mutating func dropOldest(of owner: UInt32) {
        byOwner[owner]!.removeFirst()
        sessionEvents -= 1
        if byOwner[owner]!.isEmpty { byOwner[owner] = nil }
    }

    /// The events `uid` may see, oldest first: everyone's and its own; every event for an admin.
    func visible(to uid: UInt32, isAdmin: Bool) -> [Entry] {
        var merged = Array(linkEvents)
        if isAdmin {
            for events in byOwner.values { merged += events }
        } else if let own = byOwner[uid] {
            merged += own
        }
        return merged.sorted { $0.order < $1.order }.map(\.entry)
    }

    /// Events kept: everyone's, and every uid's session events.
    var count: Int { linkEvents.count + sessionEvents }
}
