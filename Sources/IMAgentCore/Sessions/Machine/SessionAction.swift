import AgentIPC
import AgentStore
import IMLink
import NIOCore

/// What the session router asks its I/O layer (`SessionService`) to do.
enum SessionAction {
    /// Write a frame on the established link.
    case send(Frame)
    /// Submit `operation` to the store under `tag` (a number the router drew from its
    /// `Tokens`); when it completes, hand `tag`, `then` and the result back to
    /// `SessionRouter.stored(_:tag:_:now:)`. Every request to the store, write or read,
    /// goes this way.
    case store(StoreOperation, tag: UInt64, then: StoreContinuation)
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
    /// Set the TTL timer for this time (ms since the Unix epoch), earlier than it is set:
    /// call `expireDue(now:)` then (`ExpirySchedule` asks only when the timer must move).
    case expireAt(Int64)
}

enum SessionLogLevel: Hashable, Sendable {
    case debug, info, warning
}

/// What the router does once a store request is done (or failed). The request's tag
/// tells an answer the session still waits for from a stale one.
enum StoreContinuation: Hashable, Sendable {
    /// OPENED to the creating client, then OPEN upstream.
    case created(client: UInt64, request: UInt32, session: UInt64)
    /// ACCEPTED to the sending client, then transmit.
    case accepted(client: UInt64, request: UInt32, session: UInt64, seq: UInt64)
    /// ACKED to the attached client.
    case ackedStored(session: UInt64, seq: UInt64)
    /// ACK upstream (coalesced) and delivery to the client.
    case inboundStored(session: UInt64, seq: UInt64)
    /// Nothing waits on it: only a failure is logged.
    case deliveredStored(session: UInt64, seq: UInt64)
    /// EXPIRED to the attached client: the message was given up.
    case givenUp(session: UInt64, seq: UInt64, code: IPCErrorCode, reason: String)
    /// OK to the closing client, if any (request 0: the server closed it).
    case closed(client: UInt64?, request: UInt32, session: UInt64)
    /// The next outbound messages for the window, then transmit.
    case outboundRead(session: UInt64)
    /// The next inbound messages for the window, then deliver.
    case inboundRead(session: UInt64)
    /// Outbound messages after the window whose TTL passed were given up: EXPIRED for each.
    case expiredGivenUp(session: UInt64)
    /// The messages an OPEN_OK's LAST_ACKED covers beyond the window were found: complete the OPEN_OK.
    case located(session: UInt64)
}
