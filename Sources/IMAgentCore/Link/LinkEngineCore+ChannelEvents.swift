import IMLink
import NIOCore

/// What the channel handler reports about the socket: frames received (handed to
/// the state machine, the heartbeat or the sessions), the TLS handshake, errors
/// and the close.
extension LinkEngineCore {
    // MARK: Inputs from the channel handler

    func received(_ frame: Frame, on attempt: AttemptID) {
        guard var current = connection, current.attempt == attempt, !current.closing else { return }
        let now = MonotonicInstant.now
        // Any frame is proof of life; a PING is answered in every phase.
        switch frame {
        case .ping(let ping):
            performAfterFrame(heartbeat.frameReceived(now: now))
            write(.pong(ping))
        case .pong(let pong):
            perform(heartbeat.pongReceived(id: pong.id, now: now))
        case .hello, .helloOK, .login, .loginOK, .loginFail, .goaway, .error, .open, .openOK, .openFail, .close,
            .data, .ack, .window:
            performAfterFrame(heartbeat.frameReceived(now: now))
        }

        switch frame {
        case .ping, .pong:
            break
        case .helloOK(let ok):
            let result = HelloResult(version: ok.version, features: ok.features, maxFrame: ok.maxFrame)
            current.negotiated = result
            current.serverMaxFrame = min(ok.maxFrame, FrameHeader.maxNegotiableBody)
            // Seed the RTT: HELLO→HELLO_OK is one round trip (plus the
            // server's negligible work), so the first PONG deadline is
            // already fitted to the path.
            if configuration.mqtt == nil, let sent = current.helloSentAt { heartbeat.seedRTT(sample: now - sent) }
            connection = current
            run(machine.helloOK(attempt, result, now: now))
            if case .connecting(.login, _) = machine.phase {
                current.limit.maxBody = configuration.maxFrame
            }
        case .loginOK(let ok):
            if configuration.mqtt != nil {
                // The broker's Maximum Packet Size, less an `up` PUBLISH's overhead, is its MAX_FRAME.
                if let maxBody = mqttMemory.maxBody { current.serverMaxFrame = min(current.serverMaxFrame, maxBody) }
                connection = current
                if let sent = current.loginSentAt { heartbeat.seedRTT(sample: now - sent) }
            }
            serverClockOffsetMS = ok.serverTimeMS.map { Int64(clamping: $0) - Int64(clamping: unixMilliseconds()) }
            run(machine.loginOK(attempt, heartbeat: ok.heartbeatMS.map { .milliseconds(Int64($0)) }, now: now))
        case .loginFail(let fail):
            lastError = "LOGIN_FAIL \(fail.code)" + (fail.message.map { ": \($0)" } ?? "")
            run(machine.loginFail(attempt, code: fail.code, retryAfter: fail.retryAfterMS.map { .milliseconds(Int64($0)) },
                                  message: fail.message.map { LogText.bounded($0, maxBytes: 1_024) }, now: now))
        case .goaway(let goaway):
            var redirect: Endpoint?
            if let text = goaway.redirect {
                redirect = Endpoint(parsing: text)
                if redirect == nil { logger.warning("GOAWAY REDIRECT \"\(text)\" is not host:port; ignoring it") }
            }
            run(machine.goaway(
                attempt,
                code: goaway.code,
                retryAfter: goaway.retryAfterMS.map { .milliseconds(Int64($0)) },
                redirect: redirect,
                now: now
            ))
        case .error(let error) where error.session == 0:
            lastError = "ERROR \(error.code)" + (error.message.map { ": \($0)" } ?? "")
            run(machine.errorFrame(attempt, code: error.code, now: now))
        case .error, .openOK, .openFail, .close, .data, .ack, .window:
            guard machine.phase.isConnected else {
                run(machine.protocolViolation(attempt, code: .protocolError, reason: "\(frame.type) before LOGIN_OK", now: now))
                return
            }
            sessionDelegate?.received(frame)
        case .hello, .login, .open:
            run(machine.protocolViolation(attempt, code: .protocolError, reason: "\(frame.type) is sent by agents only", now: now))
        }
    }

    func tlsHandshakeCompleted(on attempt: AttemptID, negotiatedProtocol: String?, certificateNotAfterUnixMS: UInt64? = nil) {
        guard let current = connection, current.attempt == attempt, !current.closing else { return }
        serverCertificateNotAfterUnixMS = certificateNotAfterUnixMS
        // A server without ALPN says nothing; one that picked another
        // protocol is not an IMLink server.
        let expected = tls?.applicationProtocol ?? LinkTLS.alpn
        if let negotiatedProtocol, negotiatedProtocol != expected {
            failConnection(attempt, reason: "TLS: server chose ALPN \(negotiatedProtocol), not \(expected)")
            return
        }
        run(machine.tlsEstablished(attempt, now: .now))
    }

    func channelFailed(_ attempt: AttemptID, error: any Error) {
        guard let current = connection, current.attempt == attempt, !current.closing else { return }
        if let violation = error as? IMLinkError {
            lastError = "protocol violation: \(violation)"
            run(machine.protocolViolation(attempt, code: violation.code, reason: "\(violation)", now: .now))
        } else {
            failConnection(attempt, reason: "\(error)")
        }
    }

    func channelClosed(_ attempt: AttemptID) {
        guard let current = connection, current.attempt == attempt else { return }
        connection = nil
        run(machine.connectionClosed(attempt, reason: current.closeReason ?? "closed by the server", now: .now))
    }
}
