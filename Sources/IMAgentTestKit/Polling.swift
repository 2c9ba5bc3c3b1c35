/// Calls `look` until it returns a value or `limit` has passed; nil on timeout.
///
/// It looks after every wake-up, the last one included: on a loaded machine a short sleep can end
/// seconds late, past the deadline, with the awaited state long reached (CI saw a harness give up so).
public func poll<Value>(within limit: Duration, every interval: Duration = .milliseconds(50),
                        _ look: () async throws -> Value?) async throws -> Value? {
    let deadline = ContinuousClock.now + limit
    while true {
        if let found = try await look() { return found }
        guard ContinuousClock.now < deadline else { return nil }
        try await Task.sleep(for: interval)
    }
}
