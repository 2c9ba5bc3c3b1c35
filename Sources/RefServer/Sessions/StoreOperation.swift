/// One change to the durable state, queued by `SessionBook` and committed by
/// the store in a batch (group commit) before anything depending on it is sent.
enum StoreOperation: Hashable, Sendable {
    case saveSession(SessionRecord)
    case insertMessage(SessionKey, OutboundMessage)
    case deleteMessages(SessionKey, through: UInt64)
    case closeSession(SessionKey)
}
