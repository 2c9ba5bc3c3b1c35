/// What holds MESSAGEs back from a session's client, beside the session's window: the
/// client's channel is full, or an attach of the session waits for SENDs still being stored.
struct DeliveryHolds {
    /// A waiting attach: its OPENED is the reply to `request` of `client`.
    typealias Attach = (client: UInt64, request: UInt32)

    /// Clients whose channel is full: no MESSAGE until they drain.
    private var blockedClients: Set<UInt64> = []
    /// Attaches (OPEN of an existing session) waiting for SENDs still being stored, by
    /// session. OPENED's SENT_SEQ must count every message that will be ACCEPTED, or a client
    /// resuming after it would send those again; and OPENED comes before any MESSAGE.
    private var attaches: [UInt64: [Attach]] = [:]

    /// Whether MESSAGEs of `session` may go to `client` now.
    func mayDeliver(_ session: UInt64, to client: UInt64) -> Bool {
        !blockedClients.contains(client) && attaches[session] == nil
    }

    /// Whether an attach of `session` waits (a lookup that copies nothing).
    func hasAttaches(_ session: UInt64) -> Bool {
        attaches[session] != nil
    }

    /// The client's channel is full (`false`) or drained (`true`).
    mutating func setWritable(_ client: UInt64, _ writable: Bool) {
        if writable { blockedClients.remove(client) } else { blockedClients.insert(client) }
    }

    /// An attach of `session` waits until its SENDs being stored are stored.
    mutating func awaitStores(_ session: UInt64, _ attach: Attach) {
        attaches[session, default: []].append(attach)
    }

    /// The attaches of `session` that waited; none waits any more.
    mutating func takeAttaches(_ session: UInt64) -> [Attach] {
        attaches.removeValue(forKey: session) ?? []
    }

    /// The client's connection is gone: nothing waits for it.
    mutating func forget(client: UInt64) {
        blockedClients.remove(client)
        for (session, waiting) in attaches {
            let kept = waiting.filter { $0.client != client }
            attaches[session] = kept.isEmpty ? nil : kept
        }
    }
}
