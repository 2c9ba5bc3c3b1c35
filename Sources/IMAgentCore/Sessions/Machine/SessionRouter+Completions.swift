import AgentIPC
import AgentStore
import IMLink
import NIOCore

/// What the router does once the store has done (or failed) what it asked.
extension SessionRouter {
    // MARK: Persistence completions

    mutating func complete(_ continuation: StoreContinuation, tag: UInt64,
                           _ answer: Result<StoreResult, SessionPersistenceError>) -> [SessionAction] {
        /// What a write answers: done, or why not.
        let result = answer.map { _ in }
        switch continuation {
        case .created(let client, let request, let id):
            let link = link
            guard let session = table.endCreating(id, stored: (try? result.get()) != nil, change: { session in
                if link != nil { session.upstream = .opening }
            }) else {
                preconditionFailure("a create completed for session \(id), which was not being created")
            }
            if case .failure(let error) = result {
                return [.fail(client: client, request: request, error == .full ? .queueFull : .internal, "session not created: \(error)")]
            }
            var actions: [SessionAction] = []
            if session.attachedClient == client {
                actions.append(.reply(client: client, request: request, .opened(session.opened)))
            }
            if let link { actions.append(.send(.open(session.openFrame(flow: link.flow)))) }
            actions.append(.watch(SessionChange(.opened, session)))
            return actions

        case .accepted(let client, let request, let id, let seq):
            return outboundStored(client: client, request: request, session: id, seq: seq, token: tag, result)

        case .ackedStored(let id, let seq):
            switch result {
            case .failure(let error):
                // The outbox still holds them; the next OPEN_OK says the same again.
                return [.log(.warning, "session \(id): ACK \(seq) not stored: \(error)")]
            case .success:
                guard let client = table[id]?.attachedClient else { return [] }
                return [.event(client: client, .acked(.init(session: id, seq: seq)))]
            }

        case .inboundStored(let id, let seq):
            return inboundStored(session: id, seq: seq, token: tag, result)

        case .deliveredStored(let id, let seq):
            if case .failure(let error) = result {
                // A lost delivery mark costs a redelivery the client recognises by SEQ, nothing more.
                return [.log(.warning, "session \(id): delivered seq \(seq) not stored: \(error)")]
            }
            return []

        case .givenUp(let id, let seq, let code, let reason):
            var actions: [SessionAction] = []
            if case .failure(let error) = result {
                // The message stays stored: after a restart it is given up again (or sent, if the server lacks it).
                actions.append(.log(.warning, "session \(id): giving up seq \(seq) not stored: \(error)"))
            }
            actions.append(.log(.info, "session \(id): outbound seq \(seq) given up: \(reason)"))
            if let client = table[id]?.attachedClient {
                actions.append(.event(client: client, .expired(.init(session: id, seq: seq, code: code, message: reason))))
            }
            // What follows it on the link waited for this (`OutboundQueue.givingUp`).
            table.modify(id) { $0.outbound.giveUpStored() }
            return actions + transmit(id)

        case .closed(let client, let request, let id):
            var actions: [SessionAction] = []
            if case .failure(let error) = result {
                actions.append(.log(.warning, "session \(id): close not stored: \(error)"))
            }
            if let client { actions.append(.reply(client: client, request: request, .ok(.init()))) }
            return actions

        case .outboundRead(let id):
            return fillOutboundWindow(session: id, token: tag, answer.read { if case .outbound(let messages) = $0 { messages } else { nil } })

        case .inboundRead(let id):
            return fillInboundWindow(session: id, token: tag, answer.read { if case .inbound(let messages) = $0 { messages } else { nil } })

        case .expiredGivenUp(let id):
            return forgetExpiredAfterWindow(session: id, token: tag,
                                            answer.read { if case .expiredOutbound(let batch) = $0 { batch } else { nil } })

        case .located(let id):
            return completeLocatedOpenOK(session: id, token: tag, answer.read { if case .outboundSpan(let span) = $0 { span } else { nil } })
        }
    }

    /// A read of the store for the outbound window completed.
    mutating func fillOutboundWindow(session id: UInt64, token: UInt64,
                                 _ result: Result<[OutboundMessage], SessionPersistenceError>) -> [SessionAction] {
        guard table[id]?.outbound.isReading(token) == true else { return [] }  // closed, or the window was reset
        let now = now.wallMS
        // Transmits what was read, unless the read failed or found nothing.
        var stalled = true
        let actions = table.modify(id) { session -> [SessionAction] in
            let (added, earliestDeadline) = session.outbound.endRead(try? result.get(), budget: &budget)
            if case .failure(let error) = result {
                return [.log(.warning, "session \(id): outbound messages not read from the store: \(error)"),
                        .storeFailed(reason: "session \(id): outbound messages not read from the store: \(error)")]
            }
            var actions: [SessionAction] = []
            if let earliestDeadline {
                expiry.track(id)
                if let timer = expiry.wake(at: earliestDeadline) { actions.append(.expireAt(timer)) }
            }
            // An expiry that waited for this read.
            actions += session.expireStored(now: now, tokens: &tokens, limits: limits)
            if added == 0, session.outbound.hasMessagesAfterWindow {
                // Read again at once, it would find nothing again: wait for the next event instead.
                actions.append(.log(.warning, "session \(id): the store holds no outbound message after seq \(session.outbound.loadedThroughSeq)"))
            } else {
                stalled = false
            }
            return actions
        }!
        return stalled ? actions : actions + transmit(id)
    }

    /// The store found the messages an OPEN_OK's LAST_ACKED covers beyond the window.
    mutating func completeLocatedOpenOK(session id: UInt64, token: UInt64,
                                  _ result: Result<OutboundSpan, SessionPersistenceError>) -> [SessionAction] {
        guard let pending = table.modify(id, { $0.outbound.located(token: token) }) ?? nil else { return [] }  // closed, or the link changed
        switch result {
        case .failure(let error):
            return [.storeFailed(reason: "session \(id): the acknowledged outbound messages not found in the store: \(error)")]
        case .success(let span):
            return completeOpenOK(id, lastAcked: pending.lastAcked, window: pending.window, beyondWindow: span)
        }
    }

    /// A read of the store for the inbound window completed.
    mutating func fillInboundWindow(session id: UInt64, token: UInt64,
                                _ result: Result<[InboundMessage], SessionPersistenceError>) -> [SessionAction] {
        guard table[id]?.inbound.isReading(token) == true else { return [] }  // closed, detached or re-attached
        // The client may have acknowledged past this read while it ran (messages it had before
        // a restart): then what it read is behind the window, or gone, and nothing is amiss.
        let stalled: Bool = table.modify(id) { $0.inbound.endRead(try? result.get(), budget: &budget) }!
        if case .failure(let error) = result {
            return [.log(.warning, "session \(id): inbound messages not read from the store: \(error)"),
                    .storeFailed(reason: "session \(id): inbound messages not read from the store: \(error)")]
        }
        if stalled {
            // Read again at once, it would find nothing again: wait for the next event instead.
            let after = table[id]?.inbound.handedOverSeq ?? 0
            return [.log(.warning, "session \(id): the store holds no inbound message after seq \(after)")]
        }
        return deliver(id)
    }
}

extension Result<StoreResult, SessionPersistenceError> {
    /// What a read answered, as `extract` finds it; any other answer is the store failing.
    func read<Value>(_ extract: (StoreResult) -> Value?) -> Result<Value, SessionPersistenceError> {
        flatMap { answer in
            extract(answer).map { .success($0) } ?? .failure(.failed("the store answered a read with \(answer)"))
        }
    }
}
