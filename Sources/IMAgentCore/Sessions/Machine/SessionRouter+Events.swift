import AgentIPC
import AgentStore
import IMLink
import NIOCore

/// The router's whole surface: every event it takes, each handled by its seam's file and
/// then settled. `settle` is the one place where the memory budget's consequences are
/// performed (waiters refilled, the link and the clients read or not) and where
/// `sessionsActive` is reported, so a handler that releases bytes cannot forget a wake-up.
extension SessionRouter {
    // MARK: Clients

    mutating func clientOpen(_ client: SessionClient, request: UInt32, _ open: IPCMessage.Open, now: SessionTime) -> [SessionAction] {
        self.now = now
        return settle(openSession(client, request: request, open))
    }

    mutating func clientDetach(_ client: SessionClient, request: UInt32, session: UInt64, now: SessionTime) -> [SessionAction] {
        self.now = now
        return settle(detachSession(client, request: request, session: session))
    }

    mutating func clientClose(_ client: SessionClient, request: UInt32, session: UInt64, now: SessionTime) -> [SessionAction] {
        self.now = now
        return settle(closeSession(client, request: request, session: session))
    }

    mutating func clientSend(_ client: SessionClient, request: UInt32, _ send: IPCMessage.Send, now: SessionTime) -> [SessionAction] {
        self.now = now
        return settle(queueSend(client, request: request, send))
    }

    mutating func clientAck(_ client: SessionClient, request: UInt32, session: UInt64, seq: UInt64, now: SessionTime) -> [SessionAction] {
        self.now = now
        return settle(acknowledgeDelivered(client, request: request, session: session, seq: seq))
    }

    /// A client's connection is gone: its sessions live on, detached.
    mutating func clientDisconnected(_ client: UInt64, now: SessionTime) -> [SessionAction] {
        self.now = now
        return settle(disconnectClient(client))
    }

    /// Whether a client's channel accepts more: blocked clients get no MESSAGE.
    mutating func client(_ client: UInt64, writable: Bool, now: SessionTime) -> [SessionAction] {
        self.now = now
        return settle(setWritable(client, writable: writable))
    }

    /// A batch of MESSAGEs of the session was just written to its client.
    mutating func batchWritten(session: UInt64, client: UInt64, writable: Bool, now: SessionTime) -> [SessionAction] {
        self.now = now
        return settle(deliverNextBatch(session: session, client: client, writable: writable))
    }

    // MARK: The link

    mutating func linkEstablished(flow: Bool, maxFrame: UInt32 = FrameHeader.maxNegotiableBody,
                                  serverKeepsAcknowledged: Bool = true, now: SessionTime) -> [SessionAction] {
        self.now = now
        return settle(establishLink(flow: flow, maxFrame: maxFrame, serverKeepsAcknowledged: serverKeepsAcknowledged))
    }

    /// `byServer`: the server's side ended the link (closed or reset it, ERROR, GOAWAY), so the
    /// messages in flight may be why (`PoisonWatch`); false for a silent path, an overloaded
    /// server, a user's command or the daemon's own drop.
    mutating func linkLost(byServer: Bool, now: SessionTime) -> [SessionAction] {
        self.now = now
        return settle(loseLink(byServer: byServer))
    }

    /// LINK_STATE to every client with a session attached.
    mutating func linkStateChanged(_ state: LinkStateValue, now: SessionTime) -> [SessionAction] {
        self.now = now
        return settle(tellLinkState(state))
    }

    /// A session frame from the server (DATA bodies already inflated).
    mutating func received(_ frame: Frame, now: SessionTime) -> [SessionAction] {
        self.now = now
        return settle(receive(frame))
    }

    /// Sends the ACKs due since `scheduleAckFlush`.
    mutating func flushAcks(now: SessionTime) -> [SessionAction] {
        self.now = now
        return settle(sendDueAcks())
    }

    // MARK: The store and time

    /// The store did (or failed) what a `.store` action asked, under `tag`.
    mutating func stored(_ continuation: StoreContinuation, tag: UInt64, _ result: Result<StoreResult, SessionPersistenceError>,
                         now: SessionTime) -> [SessionAction] {
        self.now = now
        return settle(complete(continuation, tag: tag, result))
    }

    /// The TTL timer fired: give up what is due, everywhere.
    mutating func expireDue(now: SessionTime) -> [SessionAction] {
        self.now = now
        return settle(expireAllDue())
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
            for id in table.byPriority(settlement.wake) {
                actions += refill(id) + transmit(id) + deliver(id)
            }
        }
        let active = table.anyAttached
        guard active != reportedActive else { return actions }
        reportedActive = active
        return actions + [.sessionsActive(active)]
    }
}
