/// The daemon's recent link and session events, for `imagent events` (the
/// EVENTS request): a ring of the last `capacity` events, each at most
/// `maxEventBytes` of JSON, so memory stays bounded however busy the link
/// or the sessions are. WATCH shows what happens from now on; this is what
/// happened before.
struct EventRing {
    struct Entry: Equatable {
        var timeMS: UInt64
        /// The session's owner for a session event (shown to that uid and admins only); nil: everyone's.
        var owner: UInt32?
        /// The EVENT document, as WATCH sends it.
        var json: String
    }

    let capacity: Int
    let maxEventBytes: Int
    private var entries: [Entry] = []
    /// Where the next entry goes once the ring is full.
    private var next = 0

    init(capacity: Int = 512, maxEventBytes: Int = 2_048) {
        precondition(capacity > 0)
        self.capacity = capacity
        self.maxEventBytes = maxEventBytes
        entries.reserveCapacity(capacity)
    }

    mutating func append(_ entry: Entry) {
        var entry = entry
        if entry.json.utf8.count > maxEventBytes {
            // An event with an outsized reason (a long server message) keeps its time and kind only.
            entry.json = #"{"event":"truncated","time_ms":\#(entry.timeMS)}"#
        }
        if entries.count < capacity {
            entries.append(entry)
        } else {
            entries[next] = entry
            next = (next + 1) % capacity
        }
    }

    /// The events `uid` may see (all of them for an admin), oldest first.
    func visible(to uid: UInt32, isAdmin: Bool) -> [Entry] {
        let ordered = entries.count < capacity ? entries : Array(entries[next...] + entries[..<next])
        return ordered.filter { isAdmin || $0.owner == nil || $0.owner == uid }
    }

    var count: Int { entries.count }
}
