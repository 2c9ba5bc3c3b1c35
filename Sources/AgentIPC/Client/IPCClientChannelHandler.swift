import NIOCore

/// The client's end of one connection (not to be confused with the daemon's
/// `IPCClientHandler`, its end of the same), on the channel's event loop: frames
/// requests, matches replies to them by request id, passes events on, and
/// owns the single error path that ends the connection.
///
/// Every method runs on the event loop; `IPCConnection` hops there.
final class IPCClientChannelHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// A request waiting for its reply.
    private struct Pending {
        let op: IPCOp
        let promise: EventLoopPromise<IPCMessage>
        var timer: Scheduled<Void>?
    }

    let eventSequence: IPCEvents
    private let eventSource: IPCEvents.Producer.Source

    private var context: ChannelHandlerContext?
    private var received: ByteBuffer
    /// The daemon's MAX_PAYLOAD once WELCOME told it; frames up to 64 KiB above pass.
    private var maxPayload = IPCFrameHeader.defaultMaxPayload
    private var pending: [UInt32: Pending] = [:]
    private var lastRequestID: UInt32 = 0
    /// Set once, by `fail`: every later request fails with it at once.
    private var failure: IPCClientError?
    /// The last `ERROR` with request 0: usually why the daemon is about to close.
    private var lastUnsolicitedError: IPCMessage.ErrorReply?
    private var closedByUser = false
    /// Whether the event consumer has room; false after the producer said stop.
    private var eventsWanted = true
    /// A `read` held back while nobody wants what it would bring.
    private var readHeld = false
    /// A flush is queued on the loop for the frames written in this turn (see `flushSoon`).
    private var flushScheduled = false

    init(channel: any Channel) {
        let made = IPCEvents.Producer.makeSequence(
            backPressureStrategy: .init(lowWatermark: IPCEvents.lowWatermark, highWatermark: IPCEvents.highWatermark),
            finishOnDeinit: false,
            delegate: IPCEvents.ReadResumer(channel: channel))
        eventSequence = IPCEvents(producer: made.sequence)
        eventSource = made.source
        received = channel.allocator.buffer(capacity: 0)
    }

    // MARK: Requests, from IPCConnection

    /// Sends `message` under a fresh request id and completes `promise` with
    /// the reply — `ERROR` included: turning it into a thrown error is the
    /// caller's business, which knows the op.
    func send(_ message: IPCMessage, replyPromise promise: EventLoopPromise<IPCMessage>, timeout: Duration?) {
        if let failure { return promise.fail(failure) }
        guard let context else { return promise.fail(IPCClientError.closed) }
        let id = nextRequestID()
        var entry = Pending(op: message.op, promise: promise)
        if let timeout {
            let op = message.op
            entry.timer = context.eventLoop.assumeIsolated().scheduleTask(in: timeout.timeAmount) {
                self.failRequest(id, with: IPCClientError.timedOut(op: op, after: timeout))
            }
        }
        pending[id] = entry
        // A reply is now expected: reading must go on even if events are backed up.
        resumeHeldRead()
        write(IPCFrame(request: id, message: message), context: context, requestID: id)
    }

    /// Sends `message` with request 0: no reply on success (`ACK`). The
    /// promise completes once the frame is written.
    func post(_ message: IPCMessage, writtenPromise promise: EventLoopPromise<Void>) {
        if let failure { return promise.fail(failure) }
        guard let context else { return promise.fail(IPCClientError.closed) }
        var buffer = context.channel.allocator.buffer(capacity: 64)
        IPCFrame(request: 0, message: message).encode(into: &buffer)
        context.write(wrapOutboundOut(buffer), promise: promise)
        flushSoon(context)
    }

    /// Gives up on the request whose reply `promise` waits for (task cancelled).
    func cancel(replyPromise promise: EventLoopPromise<IPCMessage>, with error: any Error) {
        guard let id = pending.first(where: { $0.value.promise.futureResult === promise.futureResult })?.key else {
            return
        }
        failRequest(id, with: error)
    }

    func setMaxPayload(_ value: UInt32) {
        maxPayload = value
    }

    /// The program closes the client: pending requests fail with `.closed`
    /// and the events end without an error.
    func closeByUser() {
        closedByUser = true
        fail(.closed)
    }

    /// The event consumer has room again (or stopped consuming for good).
    func consumerWantsEvents() {
        eventsWanted = true
        resumeHeldRead()
    }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        fail(.connectionLost(reason: "the connection's pipeline was torn down"))
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        received.writeBuffer(&bytes)
        while failure == nil {
            let frame: IPCFrame?
            do {
                frame = try IPCFrameParser.parse(&received, maxPayload: maxPayload)
            } catch {
                return fail(.protocolViolation(error.description))
            }
            guard let frame else { break }
            route(frame)
        }
        received.discardReadBytes()
    }

    func channelInactive(context: ChannelHandlerContext) {
        fail(.connectionLost(reason: closedAfterError ?? "it closed the connection"))
        context.fireChannelInactive()
    }

    /// The daemon's last ERROR without a request, which it sends before it closes a connection.
    private var closedAfterError: String? {
        lastUnsolicitedError.map { error in
            "it closed the connection after ERROR \(error.code)" + (error.message.map { ": \($0)" } ?? "")
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A daemon that closes without reading what was sent (a refusal at accept) resets the
        // connection after its ERROR: that ERROR is the reason.
        fail(.connectionLost(reason: closedAfterError ?? "\(error)"))
    }

    /// Reads only while someone wants what arrives: the event consumer, or a
    /// request waiting for its reply. Otherwise the read waits, the socket
    /// fills, and the daemon holds further events back.
    func read(context: ChannelHandlerContext) {
        if eventsWanted || !pending.isEmpty {
            context.read()
        } else {
            readHeld = true
        }
    }

    // MARK: Internals

    private func route(_ frame: IPCFrame) {
        switch frame.message.op.direction {
        case .reply where frame.request != 0:
            // A reply to a request that timed out or was cancelled has nobody
            // waiting any more; it is dropped.
            guard let entry = pending.removeValue(forKey: frame.request) else { return }
            entry.timer?.cancel()
            entry.promise.succeed(frame.message)
        case .reply:
            if case .error(let reply) = frame.message {
                lastUnsolicitedError = reply
                deliver(.error(reply))
            } else {
                fail(.protocolViolation("\(frame.message.op) with request 0, which only ERROR may carry"))
            }
        case .event:
            guard let event = IPCEvent(frame.message) else {
                return fail(.protocolViolation("\(frame.message.op) is not an event"))
            }
            deliver(event)
        case .request:
            fail(.protocolViolation("the daemon sent the request \(frame.message.op)"))
        }
    }

    private func deliver(_ event: IPCEvent) {
        switch eventSource.yield(event) {
        case .produceMore, .dropped:
            // Dropped: nobody iterates any more, so there is nothing to wait for.
            break
        case .stopProducing:
            eventsWanted = false
        }
    }

    private func write(_ frame: IPCFrame, context: ChannelHandlerContext, requestID id: UInt32) {
        var buffer = context.channel.allocator.buffer(capacity: 64)
        frame.encode(into: &buffer)
        let written = context.eventLoop.makePromise(of: Void.self)
        written.futureResult.assumeIsolated().whenFailure { error in
            // A daemon that refused the connection (LIMIT_REACHED at accept) has closed it
            // before the first write; its ERROR, read before the close, says why.
            let reason = self.closedAfterError ?? "writing \(frame.message.op) failed: \(error)"
            self.failRequest(id, with: IPCClientError.connectionLost(reason: reason))
        }
        context.write(wrapOutboundOut(buffer), promise: written)
        flushSoon(context)
    }

    /// One flush (one `writev`) for the requests of one turn of the loop: concurrent
    /// `send` calls arrive as separate tasks and would otherwise cost a system call
    /// each. The flush runs right after the current work, so a lone request waits for nothing.
    private func flushSoon(_ context: ChannelHandlerContext) {
        guard !flushScheduled else { return }
        flushScheduled = true
        context.eventLoop.assumeIsolated().execute {
            self.flushScheduled = false
            self.context?.flush()
        }
    }

    /// Request ids run 1, 2, … and wrap, skipping 0 (no reply) and any id
    /// still waiting for its reply.
    private func nextRequestID() -> UInt32 {
        repeat {
            lastRequestID &+= 1
        } while lastRequestID == 0 || pending[lastRequestID] != nil
        return lastRequestID
    }

    private func failRequest(_ id: UInt32, with error: any Error) {
        guard let entry = pending.removeValue(forKey: id) else { return }
        entry.timer?.cancel()
        entry.promise.fail(error)
    }

    private func resumeHeldRead() {
        guard readHeld, let context else { return }
        readHeld = false
        context.read()
    }

    /// The one error path: every pending request fails with `error`, the
    /// events end (with `error`, unless the program closed the client), and
    /// the connection is closed. Later calls change nothing.
    private func fail(_ error: IPCClientError) {
        guard failure == nil else { return }
        failure = error
        let waiting = pending
        pending.removeAll()
        for entry in waiting.values {
            entry.timer?.cancel()
            entry.promise.fail(error)
        }
        if closedByUser {
            eventSource.finish()
        } else {
            eventSource.finish(error)
        }
        if let context, context.channel.isActive {
            context.close(promise: nil)
        }
    }
}
