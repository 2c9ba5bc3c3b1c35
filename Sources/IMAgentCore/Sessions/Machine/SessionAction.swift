import AgentIPC
import IMLink
import NIOCore

/// What the session router asks its I/O layer (`SessionService`) to do.
enum SessionAction {
    /// Write a frame on the established link.
    case send(Frame)
    /// Run a persistence operation; when it completes, hand `then` and the
    /// result back to `SessionRouter.persisted(_:_:)`.
    case persist(PersistOperation, then: PersistContinuation)
    /// Answer a request of a client.
    case reply(client: UInt64, request: UInt32, IPCMessage)
    /// Answer a request of a client with ERROR.
    case fail(client: UInt64, request: UInt32, IPCErrorCode, String)
    /// An event (MESSAGE, ACKED, SESSION_STATE, LINK_STATE) to a client.
    case event(client: UInt64, IPCMessage)
    /// MESSAGE frames to a client, in seq order; afterwards report whether
    /// the client is still writable (`SessionRouter.client(_:writable:)`).
    case deliver(client: UInt64, session: UInt64, [(seq: UInt64, payload: ByteBuffer)])
    /// The server broke the session protocol (a seq gap): drop the link; resume fixes it.
    case dropLink(reason: String)
    /// The local store failed (disk, database): not the server's fault, so no ERROR goes
    /// up; the link is dropped, backs off and resumes from what is stored.
    case storeFailed(reason: String)
    /// Stop (false) or resume (true) reading from the link: inbound DATA waiting for the
    /// store passed the memory budget, so TCP pushes back on the server meanwhile.
    case linkReading(Bool)
    /// Stop (false) or resume (true) reading a client's socket: its uid's SENDs waiting for
    /// the store passed their share of memory, so TCP pushes back on the client meanwhile.
    case clientReading(client: UInt64, Bool)
    /// Read up to `limit` stored outbound messages after `after` (no more than `maxBytes`),
    /// then hand them to `SessionRouter.outboundLoaded(session:token:_:)`.
    case loadOutbound(session: UInt64, after: UInt64, limit: Int, maxBytes: Int, token: UInt64)
    /// Give up the stored outbound messages after `after` whose TTL passed by `nowMS` (at most
    /// `limit`), then hand what was given up to `SessionRouter.outboundExpired(session:token:_:)`.
    case expireOutbound(session: UInt64, after: UInt64, nowMS: Int64, limit: Int, token: UInt64)
    /// Find the first `count` stored outbound messages after `after` (what a LAST_ACKED beyond the
    /// window covers), then hand them to `SessionRouter.outboundLocated(session:token:_:)`.
    case locateOutbound(session: UInt64, after: UInt64, count: Int, token: UInt64)
    /// The same for inbound messages, to `SessionRouter.inboundLoaded(session:token:_:)`.
    case loadInbound(session: UInt64, after: UInt64, limit: Int, maxBytes: Int, token: UInt64)
    /// Stored inbound DATA waits for its ACK: call `flushAcks()` once the
    /// current burst of reads and completions is over, so ACKs are coalesced.
    case scheduleAckFlush
    /// Whether any session is open, for the heartbeat's activity.
    case sessionsActive(Bool)
    /// An outbound message accepted in this process was acknowledged by the server this long
    /// after its ACCEPTED (the send → ACK latency metric).
    case acknowledged(after: Duration)
    /// Something worth a line in the log.
    case log(SessionLogLevel, String)
    /// A session was opened, attached, detached or closed, or changed state: for WATCH subscribers.
    case watch(SessionChange)
    /// A TTL passes at this time (ms since the Unix epoch): call `expireDue()` then
    /// (a timer already set for an earlier time serves).
    case expireAt(Int64)
}

enum SessionLogLevel: Hashable, Sendable {
    case debug, info, warning
}

/// A change to durable storage (see `SessionPersistence.submit`).
enum PersistOperation {
    case create(StoredSessionRecord)
    /// `expiresAtMS`: when its TTL passes (ms since the Unix epoch), kept for after a restart.
    case appendOutbound(session: UInt64, seq: UInt64, payload: ByteBuffer, expiresAtMS: Int64?)
    /// Outbound message `seq` never reached the server and never will (TTL, too large):
    /// forget it and count it in the session's `givenUp`.
    case giveUpOutbound(session: UInt64, seq: UInt64)
    /// The server holds every outbound message up to `seq`: they may be forgotten.
    case markAcked(session: UInt64, seq: UInt64)
    case appendInbound(session: UInt64, seq: UInt64, payload: ByteBuffer)
    /// A client acknowledged every inbound message up to `seq`: they may be forgotten.
    case markDelivered(session: UInt64, seq: UInt64)
    /// The session is over for good; its id stays reserved.
    case close(session: UInt64)
}

/// What the router does once a persistence operation is durable (or failed).
enum PersistContinuation: Hashable, Sendable {
    /// OPENED to the creating client, then OPEN upstream.
    case created(client: UInt64, request: UInt32, session: UInt64)
    /// ACCEPTED to the sending client, then transmit.
    case accepted(client: UInt64, request: UInt32, session: UInt64, seq: UInt64, token: UInt64)
    /// ACKED to the attached client.
    case ackedStored(session: UInt64, seq: UInt64)
    /// ACK upstream (coalesced) and delivery to the client.
    case inboundStored(session: UInt64, seq: UInt64, token: UInt64)
    /// Nothing waits on it: only a failure is logged.
    case deliveredStored(session: UInt64, seq: UInt64)
    /// EXPIRED to the attached client: the message was given up.
    case givenUp(session: UInt64, seq: UInt64, code: IPCErrorCode, reason: String)
    /// OK to the closing client, if any (request 0: the server closed it).
    case closed(client: UInt64?, request: UInt32, session: UInt64)
}
