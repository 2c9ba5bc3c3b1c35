/// What the daemon sends a client on its own, with request 0 (`ipc.md` section 5).
public enum IPCEvent: Hashable, Sendable {
    /// Inbound data for a session this client has attached; acknowledge it
    /// with `IPCClient.ack(session:seq:)` once it is processed.
    case message(IPCMessage.InboundMessage)
    /// The server holds every outbound message of the session up to `seq`.
    case acked(IPCMessage.SessionSeq)
    /// An outbound message was given up (TTL, or refused upstream).
    case expired(IPCMessage.Expired)
    case sessionState(IPCMessage.SessionStateChange)
    case linkState(IPCMessage.LinkStateChange)
    /// To WATCH subscribers: one JSON object with at least "event" and "time_ms".
    case watch(IPCMessage.JSONDocument)
    /// An `ERROR` with request 0: the reply to a failed `ACK` sent without a
    /// request id, or the daemon's last word before it closes the connection.
    case error(IPCMessage.ErrorReply)

    /// The event a frame carries, or nil for a frame that is not an event.
    init?(_ message: IPCMessage) {
        switch message {
        case .message(let inbound): self = .message(inbound)
        case .acked(let acked): self = .acked(acked)
        case .expired(let expired): self = .expired(expired)
        case .sessionState(let change): self = .sessionState(change)
        case .linkState(let change): self = .linkState(change)
        case .event(let document): self = .watch(document)
        case .error(let reply): self = .error(reply)
        case .hello, .open, .close, .detach, .send, .ack, .status, .sessions, .metrics, .watch, .events, .connect,
             .disconnect, .reconnect, .reload, .ping, .ok, .welcome, .opened, .accepted, .result, .pong:
            return nil
        }
    }
}
