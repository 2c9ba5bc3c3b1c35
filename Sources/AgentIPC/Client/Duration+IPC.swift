import NIOCore

// Durations as the client shows them in messages and hands them to NIO.
extension Duration {
    /// "10 s", "250 ms": for messages, not for parsing.
    var secondsText: String {
        let milliseconds = components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
        return milliseconds % 1000 == 0 ? "\(milliseconds / 1000) s" : "\(milliseconds) ms"
    }

    /// NIO's representation, for timers on the event loop.
    var timeAmount: TimeAmount {
        .nanoseconds(components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000)
    }
}
