/// Sessions belong to an agent: ids are chosen by agents, so two agents may
/// pick the same one, and all session state is keyed by (AGENT_ID, id).
public struct SessionKey: Hashable, Sendable, Comparable, CustomStringConvertible {
    public var agent: String
    public var id: UInt64

    public init(agent: String, id: UInt64) {
        self.agent = agent
        self.id = id
    }

    public static func < (lhs: SessionKey, rhs: SessionKey) -> Bool {
        (lhs.agent, lhs.id) < (rhs.agent, rhs.id)
    }

    public var description: String { "\(agent)/\(id)" }
}
