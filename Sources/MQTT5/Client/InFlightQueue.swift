import NIOCore

/// The outbound QoS 1 messages a `ClientSession` holds until their PUBACK, oldest
/// first, with O(1) work per message however large the broker's Receive Maximum:
/// a ring in publication order, a table from Packet Identifier to place in it,
/// and a count of those on the wire.
///
/// The messages on the wire come first and those waiting for a slot (after a
/// reconnect) after them: a session sends the waiting ones oldest first and
/// takes a new one only when none waits, so the waiting ones stay one run at
/// the end. A message acknowledged out of order leaves a gap that is dropped
/// when it reaches the front.
struct InFlightQueue<Message> {
    struct Entry {
        var tag: UInt64
        var packetIdentifier: UInt16
        var message: Message
    }

    private var ring = CircularBuffer<Entry?>()
    /// The place of `ring.first`; places only grow, so a Packet Identifier's place never changes.
    private var frontPlace = 0
    /// The place of the first message waiting for a slot (`frontPlace + ring.count` when none waits).
    private var firstWaitingPlace = 0
    private var places: [UInt16: Int] = [:]

    /// Messages on the wire, not yet acknowledged.
    private(set) var sentCount = 0

    /// Messages held: on the wire or waiting for a slot.
    var count: Int { places.count }

    var hasWaiting: Bool { firstWaitingPlace < frontPlace + ring.count }

    func contains(packetIdentifier: UInt16) -> Bool { places[packetIdentifier] != nil }

    /// Takes a message that goes on the wire now; none may be waiting.
    mutating func appendSent(_ entry: Entry) {
        precondition(!hasWaiting, "a new message would overtake one that waits")
        places[entry.packetIdentifier] = frontPlace + ring.count
        ring.append(entry)
        firstWaitingPlace += 1
        sentCount += 1
    }

    /// Removes the message on the wire with this identifier (its PUBACK came); nil if there is none.
    mutating func removeSent(packetIdentifier: UInt16) -> Entry? {
        guard let place = places[packetIdentifier], place < firstWaitingPlace,
              let entry = ring[ring.index(ring.startIndex, offsetBy: place - frontPlace)]
        else { return nil }
        places[packetIdentifier] = nil
        ring[ring.index(ring.startIndex, offsetBy: place - frontPlace)] = nil
        sentCount -= 1
        dropLeadingGaps()
        return entry
    }

    /// The connection is gone: every message waits for a slot on the next one.
    mutating func markAllWaiting() {
        firstWaitingPlace = frontPlace
        sentCount = 0
    }

    /// The oldest waiting message, now on the wire; nil when none waits.
    mutating func sendNextWaiting() -> Entry? {
        while hasWaiting {
            let entry = ring[ring.index(ring.startIndex, offsetBy: firstWaitingPlace - frontPlace)]
            firstWaitingPlace += 1
            if let entry {
                sentCount += 1
                return entry
            }
        }
        return nil
    }

    /// Visits every message held, oldest first, to change it or (returning false) to drop it.
    /// O(n): for a new connection's limits, not for each message.
    mutating func updateAll(_ body: (inout Entry) -> Bool) {
        for index in ring.indices {
            guard var entry = ring[index] else { continue }
            if body(&entry) {
                ring[index] = entry
            } else {
                ring[index] = nil
                places[entry.packetIdentifier] = nil
                if ring.distance(from: ring.startIndex, to: index) + frontPlace < firstWaitingPlace { sentCount -= 1 }
            }
        }
        dropLeadingGaps()
    }

    private mutating func dropLeadingGaps() {
        while let first = ring.first, first == nil {
            ring.removeFirst()
            frontPlace += 1
        }
        firstWaitingPlace = max(firstWaitingPlace, frontPlace)
    }
}

extension InFlightQueue: Sendable where Message: Sendable {}
extension InFlightQueue.Entry: Sendable where Message: Sendable {}
