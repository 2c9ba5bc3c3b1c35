import AgentIPC
import IMLink
import NIOCore

/// The link coming and going, and the session frames the server sends.
extension SessionRouter {
    // MARK: Link

    mutating func establishLink(flow: Bool, maxFrame: UInt32 = FrameHeader.maxNegotiableBody,
                                  serverKeepsAcknowledged: Bool = true) -> [SessionAction] {
        link = LinkInfo(flow: flow, maxFrame: maxFrame, serverKeepsAcknowledged: serverKeepsAcknowledged)
        var actions: [SessionAction] = []
        for id in closeUpstream.sorted() { actions.append(.send(.close(Close(session: id)))) }
        closeUpstream.removeAll()
        for id in sessionIDsByPriority {
            guard var session = sessions[id], !session.isFailed else { continue }
            session.upstream = .opening
            session.transmittedCount = 0
            session.locating = nil
            // The server resends from RESUME_AFTER + 1, which acknowledges everything up to it.
            session.ackedUpstreamSeq = session.receivedSeq
            sessions[id] = session
            actions.append(.send(.open(openFrame(session))))
        }
        return actions
    }

    mutating func loseLink() -> [SessionAction] {
        link = nil
        var actions: [SessionAction] = []
        for id in sessionIDsByPriority {
            guard var session = sessions[id], !session.isFailed else { continue }
            let wasOpen = session.upstream == .open
            session.upstream = .idle
            // Nothing in flight survives the link: OPEN_OK says where to resume.
            session.transmittedCount = 0
            session.locating = nil
            session.sendWindow = nil
            sessions[id] = session
            if wasOpen {
                if let client = session.attachedClient {
                    actions.append(.event(client: client, .sessionState(.init(session: id, state: .pending, message: "the link is down"))))
                }
                actions.append(.watch(SessionChange(.state, session, reason: "the link is down")))
            }
        }
        return actions
    }

    /// LINK_STATE to every client with a session attached.
    func tellLinkState(_ state: LinkStateValue) -> [SessionAction] {
        sessionsByClient.keys.sorted().map { .event(client: $0, .linkState(.init(state: state))) }
    }

    /// A session frame from the server (DATA bodies already inflated).
    mutating func receive(_ frame: Frame) -> [SessionAction] {
        switch frame {
        case .openOK(let ok): return openOK(ok)
        case .openFail(let fail): return openFail(fail)
        case .data(let data): return dataIn(data)
        case .ack(let ack): return ackIn(ack)
        case .window(let update): return windowIn(update)
        case .close(let close):
            guard sessions[close.session] != nil else {
                return [.log(.debug, "CLOSE for session \(close.session), which is not open here")]
            }
            var actions: [SessionAction] = []
            if let client = sessions[close.session]?.attachedClient {
                actions.append(.event(client: client, .sessionState(.init(session: close.session, state: .closed, message: "closed by the server"))))
            }
            actions += closeLocally(close.session, tellUpstream: false, reason: "closed by the server",
                                    then: .closed(client: nil, request: 0, session: close.session))
            return actions
        case .error(let error):
            guard error.code == .unknownSession else {
                return [.log(.warning, "server ERROR \(error.code) for session \(error.session): \(error.message ?? "")")]
            }
            guard link != nil, var session = sessions[error.session], !session.isFailed else {
                return [.log(.debug, "UNKNOWN_SESSION for session \(error.session), which is not open here")]
            }
            // The server forgot the session on this link: OPEN again and resume from its OPEN_OK.
            session.upstream = .opening
            session.transmittedCount = 0
            session.locating = nil
            session.sendWindow = nil
            sessions[error.session] = session
            return [.log(.info, "server does not know session \(error.session); opening it again"), .send(.open(openFrame(session)))]
        case .hello, .helloOK, .login, .loginOK, .loginFail, .ping, .pong, .goaway, .open:
            preconditionFailure("the link engine hands only session frames to the router, not \(frame.type)")
        }
    }

    /// Sends the ACKs due since `scheduleAckFlush`: one per session, the highest stored seq.
    mutating func sendDueAcks() -> [SessionAction] {
        ackFlushScheduled = false
        let due = acksDue
        acksDue.removeAll(keepingCapacity: true)
        guard link != nil else { return [] }
        var actions: [SessionAction] = []
        // Not a sort of every session per flush: only those with something to acknowledge.
        let ordered = due.compactMap { id in sessions[id].map { (priority: $0.priority.rawValue, id: id) } }
            .sorted { ($0.priority, $0.id) < ($1.priority, $1.id) }
        for (_, id) in ordered {
            guard let (upstream, received, acked) = sessions[id].map({ ($0.upstream, $0.receivedSeq, $0.ackedUpstreamSeq) }),
                  upstream == .open || upstream == .opening, received > acked else { continue }
            sessions[id]!.ackedUpstreamSeq = received
            actions.append(.send(.ack(Ack(session: id, seq: received))))
        }
        return actions
    }
}
