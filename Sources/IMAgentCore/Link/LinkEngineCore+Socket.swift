import IMLink
import NIOCore

/// The one socket once it exists: writing frames with one flush per loop turn,
/// failing and closing it, and reporting a close that needs no socket.
extension LinkEngineCore {
    /// The one error path for a socket: remember why, close it; the close
    /// reaches the state machine as `connectionClosed` with that reason.
    func failConnection(_ attempt: AttemptID, reason: String) {
        guard var current = connection, current.attempt == attempt else { return }
        logger.debug("closing \(attempt): \(reason)")
        lastError = reason
        if current.closeReason == nil { current.closeReason = reason }
        current.closing = true
        connection = current
        if let channel = current.channel {
            channel.close(promise: nil)
        } else {
            channelClosedLater(attempt)
        }
    }

    func closeConnection(_ attempt: AttemptID, sendError: WireCode?) {
        guard var current = connection, current.attempt == attempt else {
            // Already gone (closed by the peer in the same loop tick): the
            // machine still waits for its one `connectionClosed`.
            let late = loop.assumeIsolated()
            late.execute { [self] in run(machine.connectionClosed(attempt, reason: "already closed", now: .now)) }
            return
        }
        current.closing = true
        if current.closeReason == nil { current.closeReason = "closed by the agent" }
        connection = current
        guard let channel = current.channel else {
            // Still connecting: the connect result will find the attempt
            // gone and close its socket.
            channelClosedLater(attempt)
            return
        }
        if let sendError {
            put(.error(ErrorFrame(code: sendError)), on: channel)
        }
        handOver()
        channel.flush()
        channel.close(promise: nil)
    }

    /// Reports the close of an attempt without a socket on the next loop
    /// tick, so the machine hears it after the actions it is performing.
    private func channelClosedLater(_ attempt: AttemptID) {
        loop.assumeIsolated().execute { [self] in channelClosed(attempt) }
    }

    func write(_ frame: Frame) {
        guard let channel = connection?.channel else { return }
        put(frame, on: channel)
        scheduleFlush(channel)
        performAfterFrame(heartbeat.frameSent(now: .now, awaitsReply: frame.awaitsReply))
    }

    /// IMLink frames are encoded here, into one buffer that goes to the channel at the end of
    /// the loop's turn (or every `handOverBytes`): one trip through the pipeline per turn, not
    /// per frame. A DATA body of `handOverBytes` or more is not copied in: it follows its header
    /// as a buffer of its own (one more iovec). With MQTT the adapter in the pipeline takes the
    /// frames themselves.
    private func put(_ frame: Frame, on channel: Channel) {
        traffic.counts.framesOut += 1
        guard configuration.mqtt == nil else {
            channel.write(frame, promise: nil)
            return
        }
        if let pending = outgoing, pending.channel !== channel { handOver() }
        if outgoing == nil { outgoing = (channel, channel.allocator.buffer(capacity: Self.handOverBytes)) }
        if let body = frame.encode(into: &outgoing!.bytes, leavingBodyFrom: Self.handOverBytes) {
            handOver()
            channel.write(body, promise: nil)
        } else if outgoing!.bytes.readableBytes >= Self.handOverBytes {
            handOver()
        }
    }

    /// Gives the frames encoded so far to their channel, unflushed.
    func handOver() {
        guard let pending = outgoing else { return }
        outgoing = nil
        pending.channel.write(pending.bytes, promise: nil)
    }

    /// One flush (one `writev`) for every frame written in this turn of the loop:
    /// the DATA frames of a group commit, the ACKs of a flush, go out together.
    func scheduleFlush(_ channel: Channel) {
        guard !flushScheduled else { return }
        flushScheduled = true
        loop.assumeIsolated().execute { [self] in
            flushScheduled = false
            handOver()
            channel.flush()
            // A new connection written to in the same turn (not seen so far, but cheap to cover).
            if let current = connection?.channel, current !== channel { current.flush() }
        }
    }
}

private extension Frame {
    /// Whether the server must answer this frame (wire.md sections 4–5), so
    /// that silence after it is a reason to suspect the link.
    var awaitsReply: Bool {
        switch self {
        case .data, .open: true
        case .hello, .helloOK, .login, .loginOK, .loginFail, .ping, .pong, .goaway, .error, .openOK, .openFail,
            .close, .ack, .window:
            // PINGs have their own deadline; the handshake has its stages' deadlines.
            false
        }
    }
}

