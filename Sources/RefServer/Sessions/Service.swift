/// The services a session can talk to (the OPEN frame's SERVICE record).
public enum Service: String, Hashable, Sendable, CaseIterable {
    /// Every DATA comes back on the same session, same payload and compression flag.
    case echo
    /// DATA is stored and acknowledged, nothing more.
    case sink
    /// The server sends a configured stream of DATA after the session is created.
    case push
}
