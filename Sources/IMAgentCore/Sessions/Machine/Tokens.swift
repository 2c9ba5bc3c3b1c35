/// Numbers that tie the answer of a store request to the request: an answer whose token
/// is no longer the one a session waits for (the session was reset or closed meanwhile)
/// is stale and ignored.
struct Tokens {
    private(set) var last: UInt64 = 0

    mutating func next() -> UInt64 {
        last += 1
        return last
    }
}
