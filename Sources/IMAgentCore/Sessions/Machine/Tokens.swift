import AgentStore

/// The tags of store requests: each request has one, the store hands it back with the
/// answer, and an answer whose tag is no longer the one a session waits for (the session
/// was reset or closed meanwhile) is stale and ignored.
struct Tokens {
    private(set) var last: UInt64 = 0

    mutating func next() -> UInt64 {
        last += 1
        return last
    }
}

extension Tokens {
    /// A store request under a tag of its own.
    mutating func store(_ operation: StoreOperation, then continuation: StoreContinuation) -> SessionAction {
        .store(operation, tag: next(), then: continuation)
    }
}
