/// Names one accepted connection for the server's lifetime.
struct ConnectionID: Hashable, Sendable, CustomStringConvertible {
    var rawValue: UInt64

    var description: String { "#\(rawValue)" }
}
