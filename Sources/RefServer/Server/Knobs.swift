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
    /// HEARTBEAT_MS written in LOGIN_OK instead of `heartbeatMS` (0 allowed),
    /// while the idle check keeps `heartbeatMS`: a broken server, for the
    /// agent's floors.
    var advertisedHeartbeatMS: UInt32?
    var failLogin: FailLogin?
    var stalled = false
    /// Connections close when DATA of this session arrives (`drop-on-data`).
    var dropOnDataSession: UInt64?
    var natTimeout: TimeAmount?
}
