import AgentIPC
import IMLink
import NIOCore

/// The router's whole surface: every event it takes, each handled by its seam's file and
/// then settled. `settle` is the one place where the memory budget's consequences are
/// performed (waiters refilled, the link and the clients read or not) and where
/// `sessionsActive` is reported, so a handler that releases bytes cannot forget a wake-up.
extension SessionRouter {
    // MARK: Clients

    mutating func clientOpen(_ client: SessionClient, request: UInt32, _ open: IPCMessage.Open) -> [SessionAction] {
        settle(openSession(client, request: request, open))
    }

    mutating func clientDetach(_ client: SessionClient, request: UInt32, session: UInt64) -> [SessionAction] {
        settle(detachSession(client, request: request, session: session))
    }

    mutating func clientClose(_ client: SessionClient, request: UInt32, session: UInt64) -> [SessionAction] {
        settle(closeSession(client, request: request, session: session))
    }

    mutating func clientSend(_ client: SessionClient, request: UInt32, _ send: IPCMessage.Send) -> [SessionAction] {
        settle(queueSend(client, request: request, send))
    }

    mutating func clientAck(_ client: SessionClient, request: UInt32, session: UInt64, seq: UInt64) -> [SessionAction] {
        settle(acknowledgeDelivered(client, request: request, session: session, seq: seq))
    }

    /// A client's connection is gone: its sessions live on, detached.
    mutating func clientDisconnected(_ client: UInt64) -> [SessionAction] {
        settle(disconnectClient(client))
    }

    /// Whether a client's channel accepts more: blocked clients get no MESSAGE.
    mutating func client(_ client: UInt64, writable: Bool) -> [SessionAction] {
        settle(setWritable(client, writable: writable))
    }

    /// A batch of MESSAGEs of the session was just written to its client.
    mutating func batchWritten(session: UInt64, client: UInt64, writable: Bool) -> [SessionAction] {
        settle(deliverNextBatch(session: session, client: client, writable: writable))
    }

    // MARK: The link

    mutating func linkEstablished(flow: Bool, maxFrame: UInt32 = FrameHeader.maxNegotiableBody,
                                  serverKeepsAcknowledged: Bool = true) -> [SessionAction] {
        settle(establishLink(flow: flow, maxFrame: maxFrame, serverKeepsAcknowledged: serverKeepsAcknowledged))
    }

    mutating func linkLost() -> [SessionAction] {
        settle(loseLink())
    }

    /// LINK_STATE to every client with a session attached.
    mutating func linkStateChanged(_ state: LinkStateValue) -> [SessionAction] {
        settle(tellLinkState(state))
    }

    /// A session frame from the server (DATA bodies already inflated).
    mutating func received(_ frame: Frame) -> [SessionAction] {
        settle(receive(frame))
    }

    /// Sends the ACKs due since `scheduleAckFlush`.
    mutating func flushAcks() -> [SessionAction] {
        settle(sendDueAcks())
    }

    // MARK: The store and time

    mutating func persisted(_ continuation: PersistContinuation, _ result: Result<Void, SessionPersistenceError>) -> [SessionAction] {
        settle(complete(continuation, result))
    }

    mutating func outboundLoaded(session: UInt64, token: UInt64,
                                 _ result: Result<[StoredOutboundMessage], SessionPersistenceError>) -> [SessionAction] {
        settle(fillOutboundWindow(session: session, token: token, result))
    }

    mutating func outboundExpired(session: UInt64, token: UInt64,
                                  _ result: Result<ExpiredOutboundBatch, SessionPersistenceError>) -> [SessionAction] {
        settle(forgetExpiredAfterWindow(session: session, token: token, result))
    }

    mutating func outboundLocated(session: UInt64, token: UInt64,
                                  _ result: Result<StoredOutboxSpan, SessionPersistenceError>) -> [SessionAction] {
        settle(completeLocatedOpenOK(session: session, token: token, result))
    }

    mutating func inboundLoaded(session: UInt64, token: UInt64,
                                _ result: Result<[(seq: UInt64, payload: ByteBuffer)], SessionPersistenceError>) -> [SessionAction] {
        settle(fillInboundWindow(session: session, token: token, result))
    }

    /// The TTL timer fired: give up what is due, everywhere.
    mutating func expireDue() -> [SessionAction] {
        settle(expireAllDue())
    }

    // MARK: Settling

    /// The end of every event: what the memory budget asks for, until it asks nothing more
    /// (a woken session that hands messages to its client releases bytes, which may wake
    /// others), then whether any client holds a session.
    private mutating func settle(_ handled: [SessionAction]) -> [SessionAction] {
        var actions = handled
        while true {
            let settlement = budget.settle()
            if let reading = settlement.linkReading { actions.append(.linkReading(reading)) }
            for change in settlement.clientReading {
                actions.append(.clientReading(client: change.client, change.reading))
            }
            guard !settlement.wake.isEmpty else { break }
            for id in byPriority(settlement.wake) {
                var session = take(id)
                actions += refillOutbound(&session)
                actions += refillInbound(&session)
                sessions[id] = session
                actions += transmit(id) + deliver(id)
            }
        }
        let active = !sessionsByClient.isEmpty || creating.values.contains { $0.attachedClient != nil }
        guard active != reportedActive else { return actions }
        reportedActive = active
        return actions + [.sessionsActive(active)]
    }
}
