import NIOCore
import NIOPosix

/// A userspace TCP proxy on 127.0.0.1 that holds every chunk for `oneWay`
/// before passing it on, in both directions: a stand-in for netem (this
/// kernel has none) that adds 2 × `oneWay` to the round trip. Chunks keep
/// their order because every chunk waits the same time.
final class DelayProxy: Sendable {
    let port: Int
    private let listener: Channel

    private init(port: Int, listener: Channel) {
        self.port = port
        self.listener = listener
    }

    static func start(to target: SocketAddress, oneWay: TimeAmount) async throws -> DelayProxy {
        let group = MultiThreadedEventLoopGroup.singleton
        let listener = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.autoRead, value: false)
            .childChannelInitializer { inbound in
                ClientBootstrap(group: inbound.eventLoop)
                    .channelInitializer { outbound in
                        outbound.eventLoop.makeCompletedFuture {
                            try outbound.pipeline.syncOperations.addHandler(DelayingForwarder(peer: inbound, delay: oneWay))
                        }
                    }
                    .connect(to: target)
                    .flatMapThrowing { outbound in
                        try inbound.pipeline.syncOperations.addHandler(DelayingForwarder(peer: outbound, delay: oneWay))
                        inbound.setOption(.autoRead, value: true).whenComplete { _ in }
                        inbound.read()
                    }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        return DelayProxy(port: listener.localAddress!.port!, listener: listener)
    }

    func stop() async {
        try? await listener.close()
    }
}

/// Writes what one side reads to the other side, `delay` later.
private final class DelayingForwarder: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    let peer: Channel
    let delay: TimeAmount

    init(peer: Channel, delay: TimeAmount) {
        self.peer = peer
        self.delay = delay
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = unwrapInboundIn(data)
        let peer = self.peer
        context.eventLoop.scheduleTask(in: delay) {
            peer.writeAndFlush(bytes, promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        let peer = self.peer
        context.eventLoop.scheduleTask(in: delay) { peer.close(promise: nil) }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
