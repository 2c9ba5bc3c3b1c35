import NIOCore

/// The messages of one direction of a session that were handed to the store and
/// are not yet counted as stored, in seq order: seqs `firstSeq …` without a gap
/// (the next one is appended, completions take them from the front in order, a
/// failed store drops the failed seq and every later one).
///
/// A ring indexed by seq rather than a dictionary keyed by it: every message
/// passes through here, and a lookup is then an offset, not a hash.
struct StoringMessages {
    struct Entry {
        var payload: ByteBuffer
        /// The payload's CRC-32C when it was computed on its way in (a large payload).
        var payloadCRC: UInt32? = nil
        /// The client whose SEND it is (0 for inbound DATA), for the memory budget's account.
        var client: UInt64 = 0
        /// The store request's token: a completion for an entry given up meanwhile is recognised by it.
        var token: UInt64
        /// When an outbound message's TTL passes (ms since the Unix epoch); nil for never or inbound.
        var deadlineMS: Int64?
        /// The store completed it; it is counted once every earlier one is.
        var stored = false
    }

    /// Every session starts with this one shared storage, as its windows do (`OutboundQueue.emptyWindow`).
    private static let emptyRing = CircularBuffer<Entry>(initialCapacity: 1)

    private var ring = StoringMessages.emptyRing
    /// The seq of the front entry (when there is one); the next appended seq is `firstSeq + count`.
    private var firstSeq: UInt64

    /// Messages after `lastCounted` will be appended.
    init(after lastCounted: UInt64) {
        firstSeq = lastCounted + 1
    }

    var count: Int { ring.count }
    var isEmpty: Bool { ring.isEmpty }

    /// Appends `seq`, which must follow the last entry (or `lastCounted` when empty).
    mutating func append(_ seq: UInt64, _ entry: Entry) {
        precondition(seq == firstSeq + UInt64(ring.count), "seq \(seq) appended where \(firstSeq + UInt64(ring.count)) was due")
        ring.append(entry)
    }

    /// The entry of `seq`, if it is being stored.
    subscript(seq: UInt64) -> Entry? {
        guard let offset = offset(of: seq) else { return nil }
        return ring[ring.index(ring.startIndex, offsetBy: offset)]
    }

    /// Notes that the store completed `seq` (which must be here).
    mutating func markStored(_ seq: UInt64) {
        guard let offset = offset(of: seq) else { preconditionFailure("seq \(seq) is not being stored") }
        ring[ring.index(ring.startIndex, offsetBy: offset)].stored = true
    }

    /// Takes the front entry if it is stored: the next seq to count.
    mutating func popStored() -> Entry? {
        guard let first = ring.first, first.stored else { return nil }
        ring.removeFirst()
        firstSeq += 1
        return first
    }

    /// Drops `seq` and every later entry (their store requests failed) and returns them.
    mutating func removeFrom(_ seq: UInt64) -> [Entry] {
        guard let offset = offset(of: seq) else { return [] }
        var removed: [Entry] = []
        while ring.count > offset {
            removed.append(ring.removeLast())
        }
        return removed
    }

    /// Every entry, in seq order.
    func forEach(_ body: (Entry) -> Void) {
        ring.forEach(body)
    }

    private func offset(of seq: UInt64) -> Int? {
        guard seq >= firstSeq, seq - firstSeq < UInt64(ring.count) else { return nil }
        return Int(seq - firstSeq)
    }
}
