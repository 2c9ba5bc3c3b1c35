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
        for id in owed.takeCloses() { actions.append(.send(.close(Close(session: id)))) }
        for id in table.idsByPriority {
            table.modify(id) { session in
                guard !session.isFailed else { return }
                session.upstream = .opening
                session.outbound.resetLink()
                session.inbound.linkEstablished()
                actions.append(.send(.open(session.openFrame(flow: flow))))
            }
        }
        return actions
    }

    mutating func loseLink(byServer: Bool) -> [SessionAction] {
        link = nil
        let lostAt = now.instant
        var actions: [SessionAction] = []
        var reached: [PoisonWatch.Suspect] = []
        for id in table.idsByPriority {
            table.modify(id) { session in
                guard !session.isFailed else { return }
                // Its oldest unacknowledged message was on this link: one more loss it was in flight for.
                if byServer, session.outbound.transmittedCount > 0, let oldest = session.outbound.window.first, let writtenAt = oldest.writtenAt,
                   session.poison.linkLost(oldestUnacked: oldest.seq, writtenAt: writtenAt, lostAt: lostAt) {
                    reached.append(.init(session: id, seq: oldest.seq, writeOrder: oldest.writeOrder))
                }
                let wasOpen = session.upstream == .open
                session.upstream = .idle
                // Nothing in flight survives the link: OPEN_OK says where to resume.
                session.outbound.resetLink()
                guard wasOpen else { return }
                if let client = session.attachedClient {
                    actions.append(.event(client: client, .sessionState(.init(session: id, state: .pending, message: "the link is down"))))
                }
                actions.append(.watch(SessionChange(.state, session, reason: "the link is down")))
            }
        }
        guard let culprit = PoisonWatch.culprit(reached), let owner = table[culprit.session]?.owner else { return actions }
        totals.quarantined += 1
        let reason = "quarantined: the link was lost \(PoisonWatch.quarantineAfter) times just after seq \(culprit.seq) "
            + "of this session went to the server, which never acknowledged it; nothing more of the session is sent upstream: "
            + "close it, or restart imagentd to try it again"
        return actions + [.log(.warning, "session \(culprit.session) of uid \(owner) \(reason)")]
            + failSession(culprit.session, code: nil, reason: reason)
    }

    /// LINK_STATE to every client with a session attached.
    func tellLinkState(_ state: LinkStateValue) -> [SessionAction] {
        table.byClient.keys.sorted().map { .event(client: $0, .linkState(.init(state: state))) }
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
            guard table[close.session] != nil else {
                return [.log(.debug, "CLOSE for session \(close.session), which is not open here")]
            }
            var actions: [SessionAction] = []
            if let client = table[close.session]?.attachedClient {
                actions.append(.event(client: client, .sessionState(.init(session: close.session, state: .closed, message: "closed by the server"))))
            }
            actions += closeLocally(close.session, tellUpstream: false, reason: "closed by the server",
                                    then: .closed(client: nil, request: 0, session: close.session))
            return actions
        case .error(let error):
            guard error.code == .unknownSession else {
                return [.log(.warning, "server ERROR \(error.code) for session \(error.session): \(error.message ?? "")")]
            }
            guard let link, table[error.session]?.isFailed == false else {
                return [.log(.debug, "UNKNOWN_SESSION for session \(error.session), which is not open here")]
            }
            // The server forgot the session on this link: OPEN again and resume from its OPEN_OK.
            return table.modify(error.session) { session in
                session.upstream = .opening
                session.outbound.resetLink()
                return [.log(.info, "server does not know session \(error.session); opening it again"),
                        .send(.open(session.openFrame(flow: link.flow)))]
            }!
        case .hello, .helloOK, .login, .loginOK, .loginFail, .ping, .pong, .goaway, .open:
            preconditionFailure("the link engine hands only session frames to the router, not \(frame.type)")
        }
    }

    /// Sends the ACKs due since `scheduleAckFlush`: one per session, the highest stored seq.
    mutating func sendDueAcks() -> [SessionAction] {
        let due = owed.takeAcks()
        guard link != nil else { return [] }
        var actions: [SessionAction] = []
        // Not a sort of every session per flush: only those with something to acknowledge.
        for id in table.byPriority(due) {
            table.modify(id) { session in
                guard session.upstream == .open || session.upstream == .opening, let received = session.inbound.takeDueAck() else { return }
                actions.append(.send(.ack(Ack(session: id, seq: received))))
            }
        }
        return actions
    }
}
