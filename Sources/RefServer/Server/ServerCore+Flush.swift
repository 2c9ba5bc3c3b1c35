import IMLink
import NIOCore

/// Group commit: everything a loop tick produced — store writes, ACKs, DATA,
/// OPEN_OK — is gathered, committed in one transaction off the loop, and only
/// then written to the sockets, in the order it was produced. So an ACK or a
/// server→agent DATA never leaves before the state it implies is durable, and
/// ACKs coalesce to one per session per read burst.
extension ServerCore {
    /// The most DATA frames one session writes per tick, so one busy session
    /// cannot monopolise the loop; the rest follow on the next tick.
    static let sendBurst = 256

    func scheduleFlush() {
        guard !flushScheduled else { return }
        flushScheduled = true
        // Runs after the I/O events of this loop iteration: a whole read burst.
        loop.assumeIsolated().execute { self.flush() }
    }

    func flush() {
        flushScheduled = false
        guard !commitInFlight else { return }
        let moreToSend = pump()
        for (connection, ack) in book.takeAcks() {
            pendingFrames.append((connection, .ack(ack)))
        }
        let operations = book.takeOperations()
        let frames = pendingFrames
        pendingFrames.removeAll(keepingCapacity: true)

        if let store, let storeThread, !operations.isEmpty {
            commitInFlight = true
            storeThread.runIfActive(eventLoop: loop) { try store.commit(operations) }
                .assumeIsolated()
                .whenComplete { result in
                    self.commitInFlight = false
                    switch result {
                    case .success:
                        self.release(frames)
                    case .failure(let error):
                        // The state these frames describe is not durable: the
                        // agents must not hear of it. Closing makes them resume
                        // from what the store does hold.
                        self.logger.error("commit to \(store.path) failed, closing the affected connections: \(error)")
                        for connection in Set(frames.map(\.0)) { self.connections[connection]?.closeSilently() }
                    }
                    // Whatever arrived during the commit waits for this flush.
                    self.scheduleFlush()
                }
        } else {
            release(frames)
            if moreToSend || !pendingFrames.isEmpty {
                scheduleFlush()
            } else if let drainPromise {
                self.drainPromise = nil
                drainPromise.succeed()
            }
        }
    }

    /// Moves sendable DATA into `pendingFrames`; true when a session had more than one burst.
    private func pump() -> Bool {
        var moreToSend = false
        for key in book.sendable {
            guard let session = book.sessions[key], let attachment = session.attachment,
                  let handler = connections[attachment.connection], let negotiated = handler.negotiated else { continue }
            // Leave it marked; channelWritabilityChanged brings it back.
            guard handler.isWritable else { continue }
            let (frames, oversized) = book.takeSendable(key, limit: Self.sendBurst, maxBody: negotiated.agentMaxFrame)
            if let oversized {
                logger.warning("session \(key): message \(oversized) is larger than the agent's MAX_FRAME \(negotiated.agentMaxFrame); holding it")
            }
            if frames.count == Self.sendBurst { moreToSend = true }
            for frame in frames { pendingFrames.append((attachment.connection, .data(frame))) }
        }
        return moreToSend
    }

    private func release(_ frames: [(ConnectionID, Frame)]) {
        var touched: Set<ConnectionID> = []
        for (connection, frame) in frames {
            guard let handler = connections[connection] else { continue }
            handler.write(frame)
            touched.insert(connection)
        }
        for connection in touched { connections[connection]?.flush() }
    }

    /// Succeeds once every queued write is committed and released.
    func drain() -> EventLoopFuture<Void> {
        let promise = drainPromise ?? loop.makePromise(of: Void.self)
        drainPromise = promise
        flush()
        return promise.futureResult
    }
}
