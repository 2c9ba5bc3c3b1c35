import AgentIPC
import Foundation
import IMAgentTestKit
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A TEST DOUBLE of imagentd's IPC socket, not a daemon: a Unix-socket peer
/// in this process that answers Agent IPC/1 requests per `ipc.md` from a
/// script, and records every frame it receives. The CLI and client tests use
/// it for replies the real daemon cannot be made to give on cue (refusals,
/// silence, a closed connection); an `imagentd` process is a `RealDaemon`.
///
/// What it does per request: HELLO → WELCOME; PING → PONG; STATUS, SESSIONS,
/// METRICS → RESULT with the script's JSON; WATCH → OK, then the script's
/// events; CONNECT, DISCONNECT, RECONNECT, RELOAD → OK; OPEN of a new session
/// → OPENED (pending) with the next id; OPEN of a known session → OPENED, then
/// its scripted inbound messages as MESSAGE events; CLOSE, DETACH → OK; SEND →
/// ACCEPTED with the session's next seq; ACK → recorded (OK if request ≠ 0).
/// Unknown session ids get UNKNOWN_SESSION.
final class FakeDaemon: Sendable {
    struct Script: Sendable {
        var daemonVersion = "0.9.0-fake"
        var maxPayload: UInt32 = 1 << 20
        var status = FakeDaemon.statusJSON
        var sessions = FakeDaemon.sessionsJSON
        var metrics = FakeDaemon.metricsJSON
        /// Sent as EVENT frames right after WATCH's OK.
        var watchEvents = FakeDaemon.watchEventsJSON
        /// Sessions that exist before the test starts.
        var knownSessions: Set<UInt64> = [7]
        /// Delivered as MESSAGE seq 1, 2, … when a session is attached.
        var inbound: [UInt64: [[UInt8]]] = [7: [Array("hello".utf8), Array("world".utf8)]]
        /// Ops answered with this ERROR instead.
        var refusals: [IPCOp: IPCMessage.ErrorReply] = [:]
        /// Ops never answered (for timeouts).
        var unanswered: Set<IPCOp> = []
        /// Ops on which the daemon closes the connection without a reply.
        var disconnectOn: Set<IPCOp> = []
    }

    /// A frame the daemon received, with the connection it came on.
    struct Received: Sendable {
        var connection: Int
        var frame: IPCFrame
    }

    let socketPath: String
    let script: Script
    private let directory: String
    private let channel: any Channel
    private let log: NIOLockedValueBox<Log>

    struct Log: Sendable {
        var received: [Received] = []
        var connections = 0
        var nextSession: UInt64 = 42
        var lastSeq: [UInt64: UInt64] = [:]
    }

    private init(socketPath: String, directory: String, script: Script, channel: any Channel,
                 log: NIOLockedValueBox<Log>) {
        self.socketPath = socketPath
        self.directory = directory
        self.script = script
        self.channel = channel
        self.log = log
    }

    static func start(_ script: Script = Script()) async throws -> FakeDaemon {
        let directory = try makeTemporaryDirectory()
        let socketPath = directory + "/imagent.sock"
        let log = NIOLockedValueBox(Log())
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let number = log.withLockedValue { log in
                        log.connections += 1
                        return log.connections
                    }
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(ByteToMessageHandler(IPCFrameDecoder()))
                    try sync.addHandler(MessageToByteHandler(IPCFrameEncoder()))
                    try sync.addHandler(Connection(number: number, script: script, log: log))
                }
            }
            .bind(unixDomainSocketPath: socketPath, cleanupExistingSocketFile: true)
            .get()
        return FakeDaemon(socketPath: socketPath, directory: directory, script: script, channel: channel, log: log)
    }

    func stop() async {
        try? await channel.close()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Every frame received so far, in order.
    var received: [Received] { log.withLockedValue { $0.received } }

    /// The messages of the frames received so far whose op is `op`.
    func received(_ op: IPCOp) -> [IPCFrame] {
        received.map(\.frame).filter { $0.message.op == op }
    }

    static func makeTemporaryDirectory() throws -> String {
        try IMAgentTestKit.makeTemporaryDirectory(prefix: "imagent-test")
    }

    // MARK: The scripted documents

    static let statusJSON = """
        {"link":{"state":"connected","endpoint":"127.0.0.1:7000","connected_since_ms":1700000000000,\
        "uptime_s":3723,"rtt_ms":12.5,"heartbeat_s":30,"reconnects":2,"last_error":null,"flaps":1},\
        "daemon":{"version":"0.9.0-fake","pid":4242,"uptime_s":90061},\
        "sessions":{"count":3,"outbox":4,"inbox":5}}
        """
    static let sessionsJSON = """
        {"sessions":[{"session":7,"service":"echo","state":"open","priority":0,"attached":true,\
        "sent_seq":10,"acked_seq":9,"delivered_seq":3,"received_seq":4,"outbox":1,"inbox":1,"owner_uid":1000},\
        {"session":8,"service":"push","state":"paused","priority":2,"attached":false,\
        "sent_seq":0,"acked_seq":0,"delivered_seq":0,"received_seq":0,"outbox":0,"inbox":0}]}
        """
    static let metricsJSON = """
        {"counters":{"connect_attempts":3,"messages_sent_total":1200,"frames.in":77},\
        "gauges":{"sessions":2,"heartbeat_interval_s":30,"rtt_ms":{"p50":11.5,"p99":40},"link_up":true},\
        "uptime_s":5}
        """
    static let watchEventsJSON = [
        #"{"event":"link_state","time_ms":1700000001234,"state":"connected","endpoint":"127.0.0.1:7000"}"#,
        #"{"event":"heartbeat","time_ms":1700000002000,"rtt_ms":11,"note":"two words"}"#,
    ]
}

extension FakeDaemon {
    /// Answers one client connection; runs on its channel's event loop.
    private final class Connection: ChannelInboundHandler {
        typealias InboundIn = IPCFrame
        typealias OutboundOut = IPCFrame

        let number: Int
        let script: Script
        let log: NIOLockedValueBox<Log>

        init(number: Int, script: Script, log: NIOLockedValueBox<Log>) {
            self.number = number
            self.script = script
            self.log = log
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let frame = unwrapInboundIn(data)
            log.withLockedValue { $0.received.append(Received(connection: number, frame: frame)) }
            let op = frame.message.op
            if script.disconnectOn.contains(op) {
                context.close(promise: nil)
                return
            }
            if script.unanswered.contains(op) { return }
            if let refusal = script.refusals[op] {
                return reply(.error(refusal), to: frame, context: context)
            }
            answer(frame, context: context)
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            // As the real daemon does with a malformed frame: ERROR, then close.
            let code: IPCErrorCode = (error as? IPCError)?.code ?? .badRequest
            context.writeAndFlush(wrapOutboundOut(.event(.error(.init(code: code, message: "\(error)")))))
                .assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        }

        private func answer(_ frame: IPCFrame, context: ChannelHandlerContext) {
            switch frame.message {
            case .hello:
                reply(.welcome(.init(daemonVersion: script.daemonVersion, maxPayload: script.maxPayload,
                                     linkState: .connected)), to: frame, context: context)
            case .ping:
                reply(.pong(.init()), to: frame, context: context)
            case .status:
                reply(.result(.init(json: script.status)), to: frame, context: context)
            case .sessions:
                reply(.result(.init(json: script.sessions)), to: frame, context: context)
            case .metrics:
                reply(.result(.init(json: script.metrics)), to: frame, context: context)
            case .watch:
                reply(.ok(.init()), to: frame, context: context)
                for event in script.watchEvents {
                    context.write(wrapOutboundOut(.event(.event(.init(json: event)))), promise: nil)
                }
                context.flush()
            case .events:
                reply(.result(.init(json: #"{"events":[]}"#)), to: frame, context: context)
            case .connect, .disconnect, .reconnect, .reload:
                reply(.ok(.init()), to: frame, context: context)
            case .open(let open):
                self.open(open, frame: frame, context: context)
            case .close(let target), .detach(let target):
                guard isKnown(target.session) else { return unknownSession(frame, context: context) }
                reply(.ok(.init()), to: frame, context: context)
            case .send(let send):
                guard isKnown(send.session) else { return unknownSession(frame, context: context) }
                let seq = log.withLockedValue { log in
                    let seq = (log.lastSeq[send.session] ?? 0) + 1
                    log.lastSeq[send.session] = seq
                    return seq
                }
                reply(.accepted(.init(session: send.session, seq: seq)), to: frame, context: context)
            case .ack(let ack):
                guard isKnown(ack.session) else { return unknownSession(frame, context: context) }
                if frame.request != 0 { reply(.ok(.init()), to: frame, context: context) }
            case .ok, .welcome, .opened, .accepted, .result, .pong, .error, .message, .acked, .expired,
                 .sessionState, .linkState, .event:
                reply(.error(.init(code: .badRequest, message: "\(frame.message.op) is not a request")),
                      to: frame, context: context)
                context.close(promise: nil)
            }
        }

        private func open(_ open: IPCMessage.Open, frame: IPCFrame, context: ChannelHandlerContext) {
            guard let session = open.session, session != 0 else {
                let id = log.withLockedValue { log in
                    defer { log.nextSession += 1 }
                    return log.nextSession
                }
                return reply(.opened(.init(session: id, sessionState: .pending, sentSeq: 0, ackedSeq: 0,
                                           deliveredSeq: 0)), to: frame, context: context)
            }
            guard isKnown(session) else { return unknownSession(frame, context: context) }
            let inbound = script.inbound[session] ?? []
            reply(.opened(.init(session: session, sessionState: .open, sentSeq: 0, ackedSeq: 0, deliveredSeq: 0)),
                  to: frame, context: context)
            for (index, payload) in inbound.enumerated() {
                let message = IPCMessage.message(.init(session: session, seq: UInt64(index + 1),
                                                       payload: ByteBuffer(bytes: payload)))
                context.write(wrapOutboundOut(.event(message)), promise: nil)
            }
            context.flush()
        }

        private func isKnown(_ session: UInt64) -> Bool {
            script.knownSessions.contains(session) || log.withLockedValue { $0.nextSession > session && session >= 42 }
        }

        private func unknownSession(_ frame: IPCFrame, context: ChannelHandlerContext) {
            reply(.error(.init(code: .unknownSession, message: "no such session")), to: frame, context: context)
        }

        private func reply(_ message: IPCMessage, to frame: IPCFrame, context: ChannelHandlerContext) {
            context.writeAndFlush(wrapOutboundOut(IPCFrame(request: frame.request, message: message)), promise: nil)
        }
    }
}

/// Runs `body` against a fake daemon started for it, and stops it afterwards.
func withFakeDaemon<Result>(_ script: FakeDaemon.Script = FakeDaemon.Script(),
                            _ body: (FakeDaemon) async throws -> Result) async throws -> Result {
    let daemon = try await FakeDaemon.start(script)
    do {
        let result = try await body(daemon)
        await daemon.stop()
        return result
    } catch {
        await daemon.stop()
        throw error
    }
}
