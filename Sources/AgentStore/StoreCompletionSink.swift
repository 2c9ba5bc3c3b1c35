import NIOCore

/// Hears the outcomes of `AgentStore.submit(_:on:to:)` without a future per operation.
///
/// The store calls `storeCompleted` on the event loop named at submission with every
/// outcome of one group commit for this sink in one call, each with the tag it was
/// submitted with (in submission order, except that a submission refused because the
/// store is closing is answered at once): a daemon
/// that stores one message per SEND pays for one hop onto its loop per commit, not for
/// a promise, a callback and their allocations per message (the hot path's biggest cost
/// in a profile of the daemon).
public protocol StoreCompletionSink: AnyObject, Sendable {
    func storeCompleted(_ outcomes: [StoreCompletion])
}

/// One submitted operation's outcome, with the tag its submitter gave it.
public struct StoreCompletion: Sendable {
    public var tag: UInt64
    public var outcome: Result<StoreResult, StoreError>
}
