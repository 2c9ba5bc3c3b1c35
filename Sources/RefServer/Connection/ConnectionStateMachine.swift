import IMLink

/// The server's side of one IMLink/1 connection (`wire.md` section 4), as a
/// pure value: each event returns the one action the channel handler performs.
///
/// It owns the link phases and their legality rules; everything that outlives
/// a connection (sessions, sequence numbers) belongs to `SessionBook`, which
/// the handler reaches through the `.session` action.
///
/// ```
/// AwaitingHello ──HELLO──▶ AwaitingLogin ──LOGIN ok──▶ Established
///       │                        │                          │
///       └────── fatal error, LOGIN_FAIL, peer's ERROR ──────┴──▶ Closing
/// ```
struct ConnectionStateMachine {
    /// What HELLO settled for this connection.
    struct Negotiated: Hashable, Sendable {
        var features: Features
        /// The largest body the agent accepts: the server never sends more.
        var agentMaxFrame: UInt32
        var agentID: String
    }

    enum Phase: Hashable, Sendable {
        case awaitingHello
        case awaitingLogin(Negotiated)
        /// LOGIN was handed to the server for a verdict.
        case authenticating(Negotiated)
        case established(Negotiated)
        case closing
    }

    /// A frame of the established phase that concerns one session.
    enum SessionFrame: Hashable, Sendable {
        case open(Open)
        case close(Close)
        case data(DataFrame)
        case ack(Ack)
        case window(WindowUpdate)
    }

    enum Action: Hashable, Sendable {
        case none
        case send(Frame)
        /// Send HELLO_OK, then accept inbound bodies up to `inboundLimit`.
        case acceptHello(HelloOK, inboundLimit: UInt32)
        /// Ask the server whether this LOGIN may pass; answer with `loginAccepted` or `loginRejected`.
        case authenticate(Login)
        case session(SessionFrame)
        /// Send this frame, then close: fatal errors and LOGIN_FAIL.
        case sendAndClose(Frame)
        /// Close without a word: the agent sent a fatal ERROR itself.
        case close
    }

    /// The features this server implements; HELLO_OK offers their intersection with the agent's.
    let serverFeatures: Features
    /// The MAX_FRAME this server announces, and its inbound limit after HELLO_OK.
    let serverMaxFrame: UInt32

    private(set) var phase: Phase = .awaitingHello

    init(serverFeatures: Features, serverMaxFrame: UInt32) {
        self.serverFeatures = serverFeatures
        self.serverMaxFrame = serverMaxFrame
    }

    /// What the connection settled, once LOGIN_OK was sent.
    var established: Negotiated? {
        if case .established(let negotiated) = phase { return negotiated }
        return nil
    }

    mutating func received(_ frame: Frame) -> Action {
        if case .closing = phase { return .none }
        switch frame {
        case .ping(let ping):
            // Every phase answers PING (`wire.md` section 7).
            return .send(.pong(Ping(id: ping.id, timestampUS: ping.timestampUS)))
        case .pong:
            return .none
        case .error(let error):
            guard error.session == 0 else { return .none }
            phase = .closing
            return .close
        case .hello(let hello):
            return receivedHello(hello)
        case .login(let login):
            return receivedLogin(login)
        case .helloOK, .loginOK, .loginFail, .goaway, .openOK, .openFail:
            return fail(.protocolError, "\(frame.type.name) is sent only by the server")
        case .open(let open):
            return sessionFrame(.open(open), type: .open)
        case .close(let close):
            return sessionFrame(.close(close), type: .close)
        case .data(let data):
            return sessionFrame(.data(data), type: .data)
        case .ack(let ack):
            return sessionFrame(.ack(ack), type: .ack)
        case .window(let window):
            return sessionFrame(.window(window), type: .window)
        }
    }

    mutating func loginAccepted(heartbeatMS: UInt32, serverTimeMS: UInt64) -> Action {
        guard case .authenticating(let negotiated) = phase else {
            preconditionFailure("a LOGIN verdict arrives only after .authenticate, not in \(phase)")
        }
        phase = .established(negotiated)
        return .send(.loginOK(LoginOK(heartbeatMS: heartbeatMS, serverTimeMS: serverTimeMS)))
    }

    mutating func loginRejected(_ failure: LoginFail) -> Action {
        guard case .authenticating = phase else {
            preconditionFailure("a LOGIN verdict arrives only after .authenticate, not in \(phase)")
        }
        phase = .closing
        return .sendAndClose(.loginFail(failure))
    }

    /// The inbound bytes broke the framing rules (`wire.md` sections 1–2).
    mutating func decodingFailed(_ error: IMLinkError) -> Action {
        if case .closing = phase { return .none }
        return fail(error.code, error.description)
    }

    /// A fatal rule broken one level up (a sequence gap, an ACK of the unsent).
    mutating func violation(_ code: WireCode, _ message: String) -> Action {
        if case .closing = phase { return .none }
        return fail(code, message)
    }

    /// The server closes the connection for its own reasons (replaced, dropped, shut down).
    mutating func closing() {
        phase = .closing
    }

    private mutating func receivedHello(_ hello: Hello) -> Action {
        guard case .awaitingHello = phase else {
            return fail(.protocolError, "HELLO may be sent only once, as the first frame")
        }
        guard hello.versionMin <= FrameHeader.version, FrameHeader.version <= hello.versionMax else {
            return fail(.versionUnsupported,
                        "this server speaks version \(FrameHeader.version); HELLO offers \(hello.versionMin)–\(hello.versionMax)")
        }
        let negotiated = Negotiated(features: hello.features.intersection(serverFeatures),
                                    agentMaxFrame: hello.maxFrame, agentID: hello.agentID)
        phase = .awaitingLogin(negotiated)
        return .acceptHello(HelloOK(features: negotiated.features, maxFrame: serverMaxFrame), inboundLimit: serverMaxFrame)
    }

    private mutating func receivedLogin(_ login: Login) -> Action {
        switch phase {
        case .awaitingHello:
            return fail(.protocolError, "LOGIN before HELLO")
        case .authenticating, .established:
            return fail(.protocolError, "LOGIN may be sent only once per connection")
        case .closing:
            return .none
        case .awaitingLogin(let negotiated):
            guard login.agentID == negotiated.agentID else {
                return fail(.protocolError, "LOGIN names agent \"\(login.agentID)\" but HELLO named \"\(negotiated.agentID)\"")
            }
            phase = .authenticating(negotiated)
            return .authenticate(login)
        }
    }

    private mutating func sessionFrame(_ frame: SessionFrame, type: FrameType) -> Action {
        guard case .established(let negotiated) = phase else {
            return fail(.protocolError, IMLinkError.illegalInPhase(type, phase: "before LOGIN_OK").description)
        }
        switch frame {
        case .data(let data) where data.compressed && !negotiated.features.contains(.deflate):
            return fail(.protocolError, "DATA is COMPRESSED but DEFLATE was not negotiated")
        case .window where !negotiated.features.contains(.flow):
            return fail(.protocolError, "WINDOW without the FLOW feature")
        case .open, .close, .data, .ack, .window:
            return .session(frame)
        }
    }

    private mutating func fail(_ code: WireCode, _ message: String) -> Action {
        phase = .closing
        return .sendAndClose(.error(ErrorFrame(code: code, message: message)))
    }
}
