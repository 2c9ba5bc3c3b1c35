/// The durable state as loaded from the store at start-up.
struct StoredState: Sendable {
    var sessions: [SessionRecord] = []
    var closed: Set<SessionKey> = []
    /// Unacknowledged server→agent messages, oldest first per session.
    var messages: [SessionKey: [OutboundMessage]] = [:]
}
