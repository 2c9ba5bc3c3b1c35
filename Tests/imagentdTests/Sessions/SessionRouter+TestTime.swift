import AgentIPC
import AgentStore
import IMLink
import NIOCore

@testable import IMAgentCore

/// The instant a test router starts at.
let testStart = SessionTime(wallMS: 1_700_000_000_000, instant: .now)

/// The router's events without a time, for tests in which time does not matter: each
/// happens at the time of the event before it (the router's `now`), so time stands still
/// unless a test passes one.
extension SessionRouter {
    mutating func clientOpen(_ client: SessionClient, request: UInt32, _ open: IPCMessage.Open) -> [SessionAction] {
        clientOpen(client, request: request, open, now: now)
    }

    mutating func clientDetach(_ client: SessionClient, request: UInt32, session: UInt64) -> [SessionAction] {
        clientDetach(client, request: request, session: session, now: now)
    }

    mutating func clientClose(_ client: SessionClient, request: UInt32, session: UInt64) -> [SessionAction] {
        clientClose(client, request: request, session: session, now: now)
    }

    mutating func clientSend(_ client: SessionClient, request: UInt32, _ send: IPCMessage.Send) -> [SessionAction] {
        clientSend(client, request: request, send, now: now)
    }

    mutating func clientAck(_ client: SessionClient, request: UInt32, session: UInt64, seq: UInt64) -> [SessionAction] {
        clientAck(client, request: request, session: session, seq: seq, now: now)
    }

    mutating func clientDisconnected(_ client: UInt64) -> [SessionAction] {
        clientDisconnected(client, now: now)
    }

    mutating func client(_ client: UInt64, writable: Bool) -> [SessionAction] {
        self.client(client, writable: writable, now: now)
    }

    mutating func batchWritten(session: UInt64, client: UInt64, writable: Bool) -> [SessionAction] {
        batchWritten(session: session, client: client, writable: writable, now: now)
    }

    mutating func linkEstablished(flow: Bool, maxFrame: UInt32 = FrameHeader.maxNegotiableBody,
                                  serverKeepsAcknowledged: Bool = true) -> [SessionAction] {
        linkEstablished(flow: flow, maxFrame: maxFrame, serverKeepsAcknowledged: serverKeepsAcknowledged, now: now)
    }

    /// By default the server's side ends the link, the only loss `PoisonWatch` counts.
    mutating func linkLost(byServer: Bool = true) -> [SessionAction] {
        linkLost(byServer: byServer, now: now)
    }

    mutating func linkStateChanged(_ state: LinkStateValue) -> [SessionAction] {
        linkStateChanged(state, now: now)
    }

    mutating func received(_ frame: Frame) -> [SessionAction] {
        received(frame, now: now)
    }

    mutating func flushAcks() -> [SessionAction] {
        flushAcks(now: now)
    }

    mutating func stored(_ continuation: StoreContinuation, tag: UInt64,
                         _ result: Result<StoreResult, SessionPersistenceError>) -> [SessionAction] {
        stored(continuation, tag: tag, result, now: now)
    }

    mutating func expireDue() -> [SessionAction] {
        expireDue(now: now)
    }
}
