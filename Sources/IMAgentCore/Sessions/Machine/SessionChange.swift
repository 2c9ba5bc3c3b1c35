import AgentIPC

/// A session's life as WATCH subscribers see it (`imagent-ipc(7)`, EVENT
/// `"event":"session"`): created, attached, detached, closed, or a change of
/// its SESSION_STATE, whether or not a client is attached to hear it.
struct SessionChange: Hashable, Sendable {
    enum Kind: String, Hashable, Sendable {
        case opened, attached, detached, closed, state
    }

    var kind: Kind
    var session: UInt64
    var service: String
    /// Only the owner (and admins) hear about a session.
    var owner: UInt32
    var state: SessionStateValue
    var reason: String?

    init(_ kind: Kind, _ session: Session, state: SessionStateValue? = nil, reason: String? = nil) {
        self.kind = kind
        self.session = session.id
        self.service = session.service
        self.owner = session.owner
        self.state = state ?? session.state
        self.reason = reason
    }
}
