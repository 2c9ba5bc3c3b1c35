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
            channel.write(Frame.error(ErrorFrame(code: sendError)), promise: nil)
        }
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
        channel.write(frame, promise: nil)
        scheduleFlush(channel)
        perform(heartbeat.frameSent(now: .now, awaitsReply: frame.awaitsReply))
    }

    /// One flush (one `writev`) for every frame written in this turn of the loop:
    /// the DATA frames of a group commit, the ACKs of a flush, go out together.
    func scheduleFlush(_ channel: Channel) {
        guard !flushScheduled else { return }
        flushScheduled = true
        loop.assumeIsolated().execute { [self] in
            flushScheduled = false
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

