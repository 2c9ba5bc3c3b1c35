import AgentIPC
import IMLink
import NIOCore
import NIOPosix
import Synchronization

/// Acknowledge echoes in batches of this many (and the last one), on both paths.
let ackEvery = 64

/// One client, one new session through `imagentd`: `send` awaits ACCEPTED,
/// echoes arrive as MESSAGE events, ACKED reports the server's ACK.
func runThroughDaemon(socketPath: String, completion: Completion, size: Int, count: Int, window: Int) async throws -> RunResult {
    let client = try await IPCClient.connect(socketPath: socketPath, clientName: "imagent-bench")
    do {
        let session = try await client.open(service: completion.service).session
        let payload = ByteBuffer(repeating: 0x5A, count: size)
        let events = client.events
        let result = try await withThrowingDiscardingTaskGroup(returning: RunResult.self) { sends in
            try await drive(count: count, window: window, send: { _ in
                sends.addTask { try await client.send(session: session, payload: payload) }
            }, receive: { progress in
                var echoed = 0
                for try await event in events {
                    switch event {
                    case .message(let message) where message.session == session:
                        echoed += 1
                        if echoed % ackEvery == 0 || echoed == count {
                            try await client.ack(session: session, seq: message.seq)
                        }
                        if completion == .echo {
                            progress.yield(echoed)
                            if echoed == count { return .now }
                        }
                    case .acked(let acked) where acked.session == session && completion == .sink:
                        progress.yield(Int(acked.seq))
                        if acked.seq >= UInt64(count) { return .now }
                    case .expired(let expired):
                        throw BenchError("message \(expired.seq) expired: \(expired.code)")
                    case .error(let error):
                        throw BenchError("daemon error \(error.code): \(error.message ?? "")")
                    default:
                        break
                    }
                }
                throw BenchError("the daemon closed the connection")
            })
        }
        try await client.close(session: session)
        await client.close()
        return result
    } catch {
        await client.close()
        throw error
    }
}

/// The inbound frames of one connection: read by the handshake, then by the
/// receiving task only, never by two at once.
final class FrameReader: @unchecked Sendable {
    private var frames: NIOAsyncChannelInboundStream<Frame>.AsyncIterator

    init(_ inbound: NIOAsyncChannelInboundStream<Frame>) { frames = inbound.makeAsyncIterator() }

    func next() async throws -> Frame {
        guard let frame = try await frames.next() else { throw BenchError("the server closed the connection") }
        return frame
    }
}

/// Numbers the direct agents: their AGENT_IDs must differ, or the server
/// replaces (closes) the older connection. Runs start concurrently, hence atomic.
let directAgents = Atomic<Int>(0)

/// The baseline: a minimal IMLink agent straight to the reference server
/// (HELLO, LOGIN, OPEN, DATA, ACK of the echoes), in this process.
func runDirect(host: String, port: Int, token: String, completion: Completion, size: Int, count: Int, window: Int) async throws -> RunResult {
    let agentID = "imagent-bench-direct-\(directAgents.add(1, ordering: .relaxed).newValue)"
    let session: UInt64 = 1
    let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .connect(host: host, port: port) { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandlers([
                    ByteToMessageHandler(IMLinkFrameDecoder(maxBody: 1 << 20)),
                    MessageToByteHandler(IMLinkFrameEncoder()),
                ])
                return try NIOAsyncChannel<Frame, Frame>(wrappingChannelSynchronously: channel)
            }
        }
    return try await channel.executeThenClose { inbound, outbound in
        let reader = FrameReader(inbound)
        try await outbound.write(.hello(Hello(features: [], agentID: agentID, agentVersion: "imagent-bench", maxFrame: 1 << 20)))
        guard case .helloOK = try await reader.next() else { throw BenchError("no HELLO_OK") }
        try await outbound.write(.login(Login(token: ByteBuffer(string: token), agentID: agentID)))
        guard case .loginOK = try await reader.next() else { throw BenchError("no LOGIN_OK") }
        try await outbound.write(.open(Open(session: session, service: completion.service, resumeAfter: 0, window: 4096)))
        guard case .openOK = try await reader.next() else { throw BenchError("no OPEN_OK") }

        let payload = ByteBuffer(repeating: 0x5A, count: size)
        let result = try await drive(count: count, window: window, send: { index in
            try await outbound.write(.data(DataFrame(session: session, seq: UInt64(index + 1), body: payload)))
        }, receive: { progress in
            var echoed = 0
            while true {
                switch try await reader.next() {
                case .data(let data) where data.session == session:
                    echoed += 1
                    if echoed % ackEvery == 0 || echoed == count {
                        try await outbound.write(.ack(Ack(session: session, seq: data.seq)))
                    }
                    if completion == .echo {
                        progress.yield(echoed)
                        if echoed == count { return .now }
                    }
                case .ack(let ack) where ack.session == session && completion == .sink:
                    progress.yield(Int(ack.seq))
                    if ack.seq >= UInt64(count) { return .now }
                case .ping(let ping):
                    try await outbound.write(.pong(ping))
                case .error(let error):
                    throw BenchError("server error \(error.code): \(error.message ?? "")")
                case .goaway(let goaway):
                    throw BenchError("server GOAWAY \(goaway.code)")
                default:
                    break
                }
            }
        })
        try await outbound.write(.close(Close(session: session)))
        return result
    }
}
