import NIOCore

/// One typed method per `StoreOperation`, each a single-operation `perform`.
/// Use `perform` directly to make several operations atomic together.
extension AgentStore {
    /// Creates an open session with all counters at 0. `id` nil (or 0) draws a fresh id in
    /// the same transaction; an id already used fails with `StoreError.sessionExists`.
    public func createSession(id: UInt64? = nil, service: String, ownerUID: UInt32, priority: UInt8 = 1,
                              durable: Bool = true, createdAtMS: Int64, on loop: EventLoop) -> EventLoopFuture<SessionRecord> {
        single(.createSession(id: id, service: service, ownerUID: ownerUID, priority: priority, durable: durable,
                              createdAtMS: createdAtMS), on: loop) { result in
            guard case .session(let record) = result else { return nil }
            return record
        }
    }

    /// Stores outbound message `seq` (which must be the session's `sentSeq + 1`: the daemon
    /// assigns seqs on its loop, the store checks and persists them). Send ACCEPTED when it succeeds.
    public func appendOutbound(session: UInt64, seq: UInt64, payload: ByteBuffer, expiresAtMS: Int64? = nil,
                               on loop: EventLoop) -> EventLoopFuture<Void> {
        done(.appendOutbound(session: session, seq: seq, payload: payload, expiresAtMS: expiresAtMS), on: loop)
    }

    /// Forgets one outbound message the server never had (TTL passed, too large) and counts it.
    public func giveUpOutbound(session: UInt64, seq: UInt64, on loop: EventLoop) -> EventLoopFuture<Void> {
        done(.giveUpOutbound(session: session, seq: seq), on: loop)
    }

    /// The server's cumulative ACK: forgets outbound messages up to `upTo`, sets `ackedSeq`.
    /// A repeated or older ACK is accepted and changes nothing.
    public func markAcked(session: UInt64, upTo: UInt64, on loop: EventLoop) -> EventLoopFuture<Void> {
        done(.markAcked(session: session, upTo: upTo), on: loop)
    }

    /// Stores inbound message `seq` (which must be `receivedSeq + 1`). ACK the server when it succeeds.
    public func appendInbound(session: UInt64, seq: UInt64, payload: ByteBuffer, on loop: EventLoop) -> EventLoopFuture<Void> {
        done(.appendInbound(session: session, seq: seq, payload: payload), on: loop)
    }

    /// A client's cumulative ACK: forgets inbound messages up to `upTo`, sets `deliveredSeq`.
    public func markDelivered(session: UInt64, upTo: UInt64, on loop: EventLoop) -> EventLoopFuture<Void> {
        done(.markDelivered(session: session, upTo: upTo), on: loop)
    }

    /// The server refused the session: state failed, with its code; queues are kept. No-op on a closed session.
    public func failSession(_ session: UInt64, code: UInt16? = nil, on loop: EventLoop) -> EventLoopFuture<Void> {
        done(.failSession(session, code: code), on: loop)
    }

    /// Ends the session for good: both queues purged, state closed, the id reserved forever.
    public func closeSession(_ session: UInt64, on loop: EventLoop) -> EventLoopFuture<Void> {
        done(.closeSession(session), on: loop)
    }

    /// Gives up up to `limit` outbound messages of `session` after seq `after` whose expiry
    /// is at or before `nowMS` (counted in `givenUp`), and returns them with the next expiry
    /// after `after` still ahead. One indexed range of the session's messages with a TTL.
    public func giveUpExpiredOutbound(session: UInt64, after: UInt64, nowMS: Int64, limit: Int,
                                      on loop: EventLoop) -> EventLoopFuture<ExpiredOutbound> {
        single(.giveUpExpiredOutbound(session: session, after: after, nowMS: nowMS, limit: limit), on: loop) { result in
            guard case .expiredOutbound(let expired) = result else { return nil }
            return expired
        }
    }

    /// The last seq and the bytes of the first `count` outbound messages after `after`.
    public func outboundSpan(session: UInt64, after: UInt64, count: Int, on loop: EventLoop) -> EventLoopFuture<OutboundSpan> {
        single(.outboundSpan(session: session, after: after, count: count), on: loop) { result in
            guard case .outboundSpan(let span) = result else { return nil }
            return span
        }
    }

    /// One session's row, or nil when no session has this id.
    public func session(_ id: UInt64, on loop: EventLoop) -> EventLoopFuture<SessionRecord?> {
        single(.session(id), on: loop) { result in
            guard case .sessionRecord(let record) = result else { return nil }
            return .some(record)
        }
    }

    /// Up to `limit` outbound messages after seq `after`, in order, and no more than `maxBytes`
    /// of payload (but at least one message): the daemon's send window refills from here.
    public func outbound(session: UInt64, after: UInt64, limit: Int, maxBytes: Int = .max,
                         on loop: EventLoop) -> EventLoopFuture<[OutboundMessage]> {
        single(.outbound(session: session, after: after, limit: limit, maxBytes: maxBytes), on: loop) { result in
            guard case .outbound(let messages) = result else { return nil }
            return messages
        }
    }

    /// Up to `limit` inbound messages after seq `after`, in order, and no more than `maxBytes`
    /// of payload (but at least one message): what the daemon delivers next to a client.
    public func inbound(session: UInt64, after: UInt64, limit: Int, maxBytes: Int = .max,
                        on loop: EventLoop) -> EventLoopFuture<[InboundMessage]> {
        single(.inbound(session: session, after: after, limit: limit, maxBytes: maxBytes), on: loop) { result in
            guard case .inbound(let messages) = result else { return nil }
            return messages
        }
    }

    /// Everything persisted, for inspection and tests: every session (closed ones too)
    /// with its counters and queued messages.
    public func load(on loop: EventLoop) -> EventLoopFuture<StoreSnapshot> {
        single(.load, on: loop) { result in
            guard case .snapshot(let snapshot) = result else { return nil }
            return snapshot
        }
    }

    /// Every session with its counters and an index of its queues, without payloads:
    /// the daemon's start-up (the payloads stay on disk until they are sent or delivered).
    public func loadIndex(on loop: EventLoop) -> EventLoopFuture<StoreIndex> {
        single(.loadIndex, on: loop) { result in
            guard case .index(let index) = result else { return nil }
            return index
        }
    }

    private func done(_ operation: StoreOperation, on loop: EventLoop) -> EventLoopFuture<Void> {
        single(operation, on: loop) { result in
            guard case .done = result else { return nil }
            return ()
        }
    }

    /// `perform` of one operation, unwrapping its result with `extract` (nil means the
    /// applier answered with the wrong kind of result: a bug in this module).
    private func single<Value: Sendable>(_ operation: StoreOperation, on loop: EventLoop,
                                         _ extract: @escaping @Sendable (StoreResult) -> Value?) -> EventLoopFuture<Value> {
        perform([operation], on: loop).map { results in
            guard results.count == 1, let value = extract(results[0]) else {
                preconditionFailure("\(operation) produced \(results); each operation has exactly one result of its own kind")
            }
            return value
        }
    }
}
