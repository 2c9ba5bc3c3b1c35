import IMLink
import NIOCore
@testable import RefServer
import Testing

/// The per-connection rules, driven without sockets: one event, one expected action.
@Suite("ConnectionStateMachine")
struct ConnectionStateMachineTests {
    static let hello = Hello(features: [.deflate, .flow], agentID: "a", maxFrame: 2048)
    static let login = Login(token: ByteBuffer(string: "t"), agentID: "a")

    func established() -> ConnectionStateMachine {
        var machine = ConnectionStateMachine(serverFeatures: [.deflate, .flow], serverMaxFrame: 4096)
        _ = machine.received(.hello(Self.hello))
        _ = machine.received(.login(Self.login))
        _ = machine.loginAccepted(heartbeatMS: 1000, serverTimeMS: 5)
        return machine
    }

    @Test func helloThenLogin_establishesTheLink() {
        var machine = ConnectionStateMachine(serverFeatures: [.flow], serverMaxFrame: 4096)
        #expect(machine.received(.hello(Self.hello)) == .acceptHello(HelloOK(features: .flow, maxFrame: 4096), inboundLimit: 4096))
        #expect(machine.received(.login(Self.login)) == .authenticate(Self.login))
        #expect(machine.loginAccepted(heartbeatMS: 1000, serverTimeMS: 5) == .send(.loginOK(LoginOK(heartbeatMS: 1000, serverTimeMS: 5))))
        #expect(machine.established == .init(features: .flow, agentMaxFrame: 2048, agentID: "a"))
    }

    @Test func rejectedLogin_sendsLoginFailAndCloses() {
        var machine = ConnectionStateMachine(serverFeatures: [.flow], serverMaxFrame: 4096)
        _ = machine.received(.hello(Self.hello))
        _ = machine.received(.login(Self.login))
        let failure = LoginFail(code: .tokenInvalid)
        #expect(machine.loginRejected(failure) == .sendAndClose(.loginFail(failure)))
        #expect(machine.received(.ping(Ping(id: 1, timestampUS: 1))) == .none)
    }

    @Test func versionOutsideRange_isUnsupported() {
        var machine = ConnectionStateMachine(serverFeatures: [], serverMaxFrame: 4096)
        var hello = Self.hello
        hello.versionMin = 2
        hello.versionMax = 4
        guard case .sendAndClose(.error(let error)) = machine.received(.hello(hello)) else {
            Issue.record("expected a fatal ERROR")
            return
        }
        #expect(error.code == .versionUnsupported)
        #expect(machine.phase == .closing)
    }

    @Test(arguments: [
        Frame.open(Open(session: 1, service: "echo", resumeAfter: 0)),
        .data(DataFrame(session: 1, seq: 1, body: ByteBuffer())),
        .ack(Ack(session: 1, seq: 1)),
        .close(Close(session: 1)),
    ])
    func sessionFrameBeforeLogin_isProtocolError(frame: Frame) {
        var machine = ConnectionStateMachine(serverFeatures: [.flow], serverMaxFrame: 4096)
        _ = machine.received(.hello(Self.hello))
        guard case .sendAndClose(.error(let error)) = machine.received(frame) else {
            Issue.record("expected a fatal ERROR")
            return
        }
        #expect(error.code == .protocolError)
    }

    @Test func loginBeforeHello_andSecondHello_areProtocolErrors() {
        var fresh = ConnectionStateMachine(serverFeatures: [], serverMaxFrame: 4096)
        guard case .sendAndClose(.error) = fresh.received(.login(Self.login)) else {
            Issue.record("LOGIN before HELLO was accepted")
            return
        }
        var machine = established()
        guard case .sendAndClose(.error) = machine.received(.hello(Self.hello)) else {
            Issue.record("a second HELLO was accepted")
            return
        }
    }

    @Test func loginWithAnotherAgentID_isProtocolError() {
        var machine = ConnectionStateMachine(serverFeatures: [], serverMaxFrame: 4096)
        _ = machine.received(.hello(Self.hello))
        guard case .sendAndClose(.error(let error)) = machine.received(.login(Login(token: ByteBuffer(), agentID: "b"))) else {
            Issue.record("expected a fatal ERROR")
            return
        }
        #expect(error.code == .protocolError)
    }

    @Test func serverOnlyFrames_fromTheAgent_areProtocolErrors() {
        var machine = established()
        guard case .sendAndClose(.error) = machine.received(.openOK(OpenOK(session: 1, lastAcked: 0))) else {
            Issue.record("OPEN_OK from an agent was accepted")
            return
        }
    }

    @Test func windowWithoutFlow_andCompressionWithoutDeflate_areProtocolErrors() {
        var machine = ConnectionStateMachine(serverFeatures: [], serverMaxFrame: 4096)
        _ = machine.received(.hello(Self.hello))
        _ = machine.received(.login(Self.login))
        _ = machine.loginAccepted(heartbeatMS: 1, serverTimeMS: 1)
        var copy = machine
        guard case .sendAndClose(.error) = machine.received(.window(WindowUpdate(session: 1, window: 3))) else {
            Issue.record("WINDOW without FLOW was accepted")
            return
        }
        guard case .sendAndClose(.error) = copy.received(.data(DataFrame(session: 1, seq: 1, compressed: true, body: ByteBuffer()))) else {
            Issue.record("compressed DATA without DEFLATE was accepted")
            return
        }
    }

    @Test func establishedSessionFrames_goToTheSessionLayer() {
        var machine = established()
        let data = DataFrame(session: 1, seq: 1, compressed: true, body: ByteBuffer(string: "x"))
        #expect(machine.received(.data(data)) == .session(.data(data)))
        #expect(machine.received(.window(WindowUpdate(session: 1, window: 0))) == .session(.window(WindowUpdate(session: 1, window: 0))))
    }

    @Test func ping_isAnsweredInEveryPhase_andPeerErrorCloses() {
        var machine = ConnectionStateMachine(serverFeatures: [], serverMaxFrame: 4096)
        #expect(machine.received(.ping(Ping(id: 3, timestampUS: 9))) == .send(.pong(Ping(id: 3, timestampUS: 9))))
        var established = established()
        #expect(established.received(.ping(Ping(id: 4, timestampUS: 8))) == .send(.pong(Ping(id: 4, timestampUS: 8))))
        #expect(established.received(.error(ErrorFrame(session: 5, code: .unknownSession))) == .none)
        #expect(established.received(.error(ErrorFrame(code: .protocolError))) == .close)
    }
}
