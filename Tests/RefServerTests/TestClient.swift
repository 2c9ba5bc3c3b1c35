import IMLink
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A waited-for frame did not come in time.
struct TestTimeout: Error, CustomStringConvertible {
    var what: String
    var description: String { "timed out waiting for \(what)" }
}

/// Collects the frames a test client receives and hands them out one at a time.
final class FrameCollector: ChannelInboundHandler {
    typealias InboundIn = Frame

    private var frames = CircularBuffer<Frame>()
    private var waiter: (promise: EventLoopPromise<Frame?>, timeout: Scheduled<Void>)?
    private var closed = false
    /// Why the client could not read the server's bytes, if it could not: reported instead of a close.
    private var decodingError: Error?
    /// The ALPN protocol, once a TLS handshake completed.
    private(set) var negotiatedProtocol: String?

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted(let negotiated) = event as? TLSUserEvent {
            negotiatedProtocol = negotiated
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        if let waiter {
            self.waiter = nil
            waiter.timeout.cancel()
            waiter.promise.succeed(frame)
        } else {
            frames.append(frame)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        closed = true
        if let waiter {
            self.waiter = nil
            waiter.timeout.cancel()
            if let decodingError {
                waiter.promise.fail(decodingError)
            } else {
                waiter.promise.succeed(nil)
            }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        decodingError = error
        context.close(promise: nil)
    }

    /// The next frame, nil once the connection is closed and every frame was read.
    func next(on loop: EventLoop, timeout: TimeAmount) -> EventLoopFuture<Frame?> {
        precondition(waiter == nil, "one reader at a time")
        if !frames.isEmpty { return loop.makeSucceededFuture(frames.removeFirst()) }
        if closed {
            if let decodingError { return loop.makeFailedFuture(decodingError) }
            return loop.makeSucceededFuture(nil)
        }
        let promise = loop.makePromise(of: Frame?.self)
        let timeoutTask = loop.assumeIsolated().scheduleTask(in: timeout) {
            self.waiter = nil
            promise.fail(TestTimeout(what: "a frame"))
        }
        waiter = (promise, timeoutTask)
        return promise.futureResult
    }
}

/// A minimal IMLink agent over NIO and the IMLink codec, for driving the server by hand.
final class TestClient: Sendable {
    let channel: Channel
    /// How long a read waits when the caller names no timeout.
    let frameTimeout: TimeAmount
    private let collector: NIOLoopBound<FrameCollector>

    private init(channel: Channel, frameTimeout: TimeAmount, collector: NIOLoopBound<FrameCollector>) {
        self.channel = channel
        self.frameTimeout = frameTimeout
        self.collector = collector
    }

    /// Connects over TCP, or over TLS when `tls` is given (`serverHostname` for SNI).
    static func connect(port: Int, host: String = "127.0.0.1", tls: NIOSSLContext? = nil, frameTimeout: TimeAmount = .seconds(5),
                        group: EventLoopGroup = MultiThreadedEventLoopGroup.singleton) async throws -> TestClient {
        let channel = try await ClientBootstrap(group: group)
            .connectTimeout(.seconds(10))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let tls {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: tls, serverHostname: nil))
                    }
                    try channel.pipeline.syncOperations.addHandlers([
                        ByteToMessageHandler(IMLinkFrameDecoder(maxBody: FrameHeader.maxNegotiableBody)),
                        MessageToByteHandler(IMLinkFrameEncoder()),
                        FrameCollector(),
                    ])
                }
            }
            .connect(host: host, port: port)
            .get()
        let collector = try await channel.eventLoop.submit {
            NIOLoopBound(try channel.pipeline.syncOperations.handler(type: FrameCollector.self), eventLoop: channel.eventLoop)
        }.get()
        return TestClient(channel: channel, frameTimeout: frameTimeout, collector: collector)
    }

    func send(_ frames: Frame...) async throws {
        for frame in frames { channel.write(frame, promise: nil) }
        channel.flush()
    }

    /// The ALPN protocol TLS settled on, nil without TLS.
    var negotiatedProtocol: String? {
        get async throws {
            let collector = self.collector
            return try await channel.eventLoop.submit { collector.value.negotiatedProtocol }.get()
        }
    }

    /// Writes bytes past the frame encoder, for malformed input.
    func sendRaw(_ bytes: ByteBuffer) async throws {
        let channel = self.channel
        try await channel.eventLoop.flatSubmit {
            do {
                let encoder = try channel.pipeline.syncOperations.context(handlerType: MessageToByteHandler<IMLinkFrameEncoder>.self)
                return encoder.writeAndFlush(NIOAny(bytes))
            } catch {
                return channel.eventLoop.makeFailedFuture(error)
            }
        }.get()
    }

    /// The next frame; nil when the server closed the connection.
    func next(timeout: TimeAmount? = nil) async throws -> Frame? {
        let timeout = timeout ?? frameTimeout
        let collector = self.collector
        let loop = channel.eventLoop
        return try await loop.flatSubmit { collector.value.next(on: loop, timeout: timeout) }.get()
    }

    /// The next frame, which must exist.
    func expectFrame(timeout: TimeAmount? = nil, sourceLocation: SourceLocation = #_sourceLocation) async throws -> Frame {
        guard let frame = try await next(timeout: timeout) else {
            Issue.record("the server closed the connection", sourceLocation: sourceLocation)
            throw TestTimeout(what: "a frame, but the connection closed")
        }
        return frame
    }

    /// True when nothing arrives within `interval` (and the connection stays open).
    func isQuiet(for interval: TimeAmount) async throws -> Bool {
        do {
            let frame = try await next(timeout: interval)
            if let frame { Issue.record("expected silence, got \(frame)") }
            return false
        } catch is TestTimeout {
            return true
        }
    }

    /// A PING round trip: everything sent before it has been handled by the server.
    func roundTrip(id: UInt64 = 0xF00D, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        try await send(.ping(Ping(id: id, timestampUS: id)))
        let reply = try await expectFrame()
        #expect(reply == .pong(Ping(id: id, timestampUS: id)), sourceLocation: sourceLocation)
    }

    /// Reads until the server closes, recording an issue for any frame that still arrives.
    /// With `resetAllowed`, a TCP reset counts as the close too: a socket closed without a
    /// goodbye may reach the client as RST rather than FIN, and both mean "gone, no frame".
    func expectClosed(timeout: TimeAmount? = nil, resetAllowed: Bool = false) async throws {
        do {
            while let frame = try await next(timeout: timeout) {
                Issue.record("expected the connection to close, got \(frame)")
            }
        } catch let error as IOError where resetAllowed && error.errnoCode == ECONNRESET {
            return
        }
    }

    func close() async {
        try? await channel.close()
    }

    // MARK: Handshake helpers

    @discardableResult
    func hello(agentID: String, features: Features = [.deflate, .flow], maxFrame: UInt32 = 1 << 20,
               versionMin: UInt8 = 1, versionMax: UInt8 = 1) async throws -> Frame {
        try await send(.hello(Hello(versionMin: versionMin, versionMax: versionMax, features: features,
                                    agentID: agentID, agentVersion: "test", maxFrame: maxFrame)))
        return try await expectFrame()
    }

    @discardableResult
    func login(agentID: String, token: String = TestEnvironment.token) async throws -> Frame {
        try await send(.login(Login(token: ByteBuffer(string: token), agentID: agentID)))
        return try await expectFrame()
    }

    /// HELLO then LOGIN, both of which must succeed; returns LOGIN_OK.
    @discardableResult
    func handshake(agentID: String, features: Features = [.deflate, .flow], maxFrame: UInt32 = 1 << 20,
                   sourceLocation: SourceLocation = #_sourceLocation) async throws -> LoginOK {
        let hello = try await hello(agentID: agentID, features: features, maxFrame: maxFrame)
        guard case .helloOK = hello else {
            Issue.record("expected HELLO_OK, got \(hello)", sourceLocation: sourceLocation)
            throw TestTimeout(what: "HELLO_OK")
        }
        let login = try await login(agentID: agentID)
        guard case .loginOK(let ok) = login else {
            Issue.record("expected LOGIN_OK, got \(login)", sourceLocation: sourceLocation)
            throw TestTimeout(what: "LOGIN_OK")
        }
        return ok
    }

    /// OPEN, which must succeed; returns OPEN_OK.
    @discardableResult
    func open(_ session: UInt64, service: String, resumeAfter: UInt64 = 0, window: UInt32? = nil,
              sourceLocation: SourceLocation = #_sourceLocation) async throws -> OpenOK {
        try await send(.open(Open(session: session, service: service, resumeAfter: resumeAfter, window: window)))
        let reply = try await expectFrame()
        guard case .openOK(let ok) = reply else {
            Issue.record("expected OPEN_OK, got \(reply)", sourceLocation: sourceLocation)
            throw TestTimeout(what: "OPEN_OK")
        }
        return ok
    }

    func sendData(_ session: UInt64, seq: UInt64, _ text: String, compressed: Bool = false) async throws {
        try await send(.data(DataFrame(session: session, seq: seq, compressed: compressed, body: ByteBuffer(string: text))))
    }
}
