import IMLink
import NIOCore

/// The fault knobs and tunables that admin commands turn while the server runs.
struct Knobs: Sendable {
    struct FailLogin: Sendable {
        var code: WireCode
        var retryAfterMS: UInt32?
        var remaining: Int
    }

    var heartbeatMS: UInt32
    var failLogin: FailLogin?
    var stalled = false
    var natTimeout: TimeAmount?
}
