/// The ids of sessions closed most recently, so that OPEN of one answers
/// SESSION_CLOSED and a new session never takes it. Bounded: an OPEN/CLOSE
/// loop would otherwise grow memory for ever. The oldest are forgotten first
/// (the store prunes their rows the same way); a forgotten id is answered as
/// unknown, and drawing it again among 2^64 random ids is not a concern.
struct ClosedSessionIDs: Hashable, Sendable {
    /// As many as the store keeps rows of closed sessions (`StoreLimits`).
    static let remembered = 10_000

    private(set) var ids: Set<UInt64> = []
    /// Insertion order, oldest first from `head`.
    private var order: [UInt64] = []
    private var head = 0
    let capacity: Int

    init(_ ids: some Sequence<UInt64> = [], capacity: Int = Self.remembered) {
        self.capacity = capacity
        for id in ids { insert(id) }
    }

    var count: Int { ids.count }

    func contains(_ id: UInt64) -> Bool { ids.contains(id) }

    mutating func insert(_ id: UInt64) {
        guard ids.insert(id).inserted else { return }
        order.append(id)
        if ids.count > capacity {
            ids.remove(order[head])
            head += 1
        }
        // Drop the forgotten prefix once it is as long as what is kept.
        if head >= capacity {
            order.removeFirst(head)
            head = 0
        }
    }
}
