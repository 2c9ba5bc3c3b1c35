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
            .childChannelInitializer { inbound in
                inbound.eventLoop.makeCompletedFuture {
                    try inbound.pipeline.syncOperations.addHandler(ProxyFrontend(target: target, delay: oneWay))
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

/// The accepted side: connects to the target when active, holds what it
/// reads until then, and forwards everything `delay` later.
private final class ProxyFrontend: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    let target: SocketAddress
    let delay: TimeAmount
    private var backend: Channel?
    private var held: [ByteBuffer] = []

    init(target: SocketAddress, delay: TimeAmount) {
        self.target = target
        self.delay = delay
    }

    func channelActive(context: ChannelHandlerContext) {
        let inbound = context.channel
        let delay = self.delay
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        ClientBootstrap(group: context.eventLoop)
            .channelInitializer { outbound in
                outbound.eventLoop.makeCompletedFuture {
                    try outbound.pipeline.syncOperations.addHandler(DelayingForwarder(peer: inbound, delay: delay))
                }
            }
            .connect(to: target)
            .whenComplete { result in
                switch result {
                case .success(let outbound):
                    let frontend = handler.value
                    frontend.backend = outbound
                    for bytes in frontend.held { frontend.forward(bytes) }
                    frontend.held = []
                case .failure:
                    inbound.close(promise: nil)
                }
            }
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = unwrapInboundIn(data)
        if backend == nil { held.append(bytes) } else { forward(bytes) }
    }

    private func forward(_ bytes: ByteBuffer) {
        guard let backend else { return }
        backend.eventLoop.scheduleTask(in: delay) { backend.writeAndFlush(bytes, promise: nil) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if let backend { backend.eventLoop.scheduleTask(in: delay) { backend.close(promise: nil) } }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
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
