import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A userspace TCP proxy (a stand-in for netem, which this kernel lacks), the
/// listening side of `imagent-chaos proxy` and of the heartbeat tests: every
/// accepted connection gets a connection to the target on the same event loop
/// and a `DelayLine` each way.
public final class DelayProxy: Sendable {
    public let port: Int
    private let listener: Channel

    public var closeFuture: EventLoopFuture<Void> { listener.closeFuture }

    private init(port: Int, listener: Channel) {
        self.port = port
        self.listener = listener
    }

    /// On 127.0.0.1, every chunk held for exactly `oneWay` each way: 2 × `oneWay` more round trip.
    public static func start(to target: SocketAddress, oneWay: TimeAmount) async throws -> DelayProxy {
        let milliseconds = Int(oneWay.nanoseconds / 1_000_000)
        return try await start(listenHost: "127.0.0.1", port: 0, target: target,
                               delays: DelayRange(minMS: milliseconds, maxMS: milliseconds), seed: 0)
    }

    public static func start(listenHost: String, port: Int, target: SocketAddress, delays: DelayRange,
                             seed: UInt64) async throws -> DelayProxy {
        let connections = NIOLockedValueBox<UInt64>(0)
        let listener = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { inbound in
                let number = connections.withLockedValue { count -> UInt64 in
                    count += 1
                    return count
                }
                return inbound.eventLoop.makeCompletedFuture {
                    try inbound.pipeline.syncOperations.addHandler(
                        ProxyFrontend(target: target, delays: delays, seed: seed &+ number &* 0x1_0000))
                }
            }
            .bind(host: listenHost, port: port)
            .get()
        return DelayProxy(port: listener.localAddress?.port ?? port, listener: listener)
    }

    /// Stops listening; connections already open go on until their ends close.
    public func stop() async {
        try? await listener.close()
    }
}

/// The accepted side: connects to the target when active, holds what it reads
/// until then, and feeds everything through its `DelayLine`.
private final class ProxyFrontend: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    private let target: SocketAddress
    private let delays: DelayRange
    private let seed: UInt64
    private var toTarget: DelayLine?
    private var held: [ByteBuffer] = []
    private var closedEarly = false

    init(target: SocketAddress, delays: DelayRange, seed: UInt64) {
        self.target = target
        self.delays = delays
        self.seed = seed
    }

    func channelActive(context: ChannelHandlerContext) {
        let inbound = context.channel
        let (delays, seed) = (self.delays, self.seed)
        let frontend = NIOLoopBound(self, eventLoop: context.eventLoop)
        ClientBootstrap(group: context.eventLoop)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connectTimeout(.seconds(5))
            .channelInitializer { outbound in
                outbound.eventLoop.makeCompletedFuture {
                    let back = DelayLine(peer: inbound, delays: delays, random: SplitMix64(seed: seed &+ 1))
                    try outbound.pipeline.syncOperations.addHandler(ProxyBackend(toFrontend: back))
                }
            }
            .connect(to: target)
            .whenComplete { result in
                let frontend = frontend.value
                switch result {
                case .success(let outbound):
                    let line = DelayLine(peer: outbound, delays: delays, random: SplitMix64(seed: seed))
                    frontend.toTarget = line
                    for bytes in frontend.held { line.push(bytes) }
                    frontend.held = []
                    if frontend.closedEarly { line.finish() }
                case .failure:
                    inbound.close(promise: nil)
                }
            }
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = unwrapInboundIn(data)
        if let toTarget { toTarget.push(bytes) } else { held.append(bytes) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if let toTarget { toTarget.finish() } else { closedEarly = true }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

/// The target's side: what it reads goes back through the other `DelayLine`.
private final class ProxyBackend: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    private let toFrontend: DelayLine

    init(toFrontend: DelayLine) {
        self.toFrontend = toFrontend
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        toFrontend.push(unwrapInboundIn(data))
    }

    func channelInactive(context: ChannelHandlerContext) {
        toFrontend.finish()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
