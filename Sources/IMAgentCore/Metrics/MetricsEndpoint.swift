import Logging
import NIOCore
import NIOHTTP1
import NIOPosix

/// `[metrics] prometheus_listen`: `GET /metrics` in the Prometheus text
/// format over HTTP/1.1, on the daemon's event loop. Anything else gets 404
/// (another path) or 405 (another method). Bounded like the IPC server: at
/// most `maxConnections` at once, each closed after `idleTimeout` without a
/// request; request bodies are never read into memory.
final class MetricsEndpoint: Sendable {
    static let maxConnections = 16
    static let idleTimeout = TimeAmount.seconds(30)

    private let channel: Channel
    let address: String

    private init(channel: Channel, address: String) {
        self.channel = channel
        self.address = address
    }

    /// Binds `host:port`; `render` runs on `eventLoop` for every scrape.
    static func start(listen: String, eventLoop: EventLoop, logger: Logger,
                      render: @escaping @Sendable () -> [UInt8]) async throws -> MetricsEndpoint {
        guard let endpoint = Endpoint(parsing: listen) else {
            throw MetricsEndpointError("[metrics] prometheus_listen \"\(listen)\" is not host:port")
        }
        let open = try await eventLoop.submit { NIOLoopBoundBox(0, eventLoop: eventLoop) }.get()
        let channel = try await ServerBootstrap(group: eventLoop)
            .serverChannelOption(.backlog, value: 16)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                guard open.value < maxConnections else {
                    return channel.close()
                }
                open.value += 1
                channel.closeFuture.whenComplete { _ in open.value -= 1 }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(IdleStateHandler(allTimeout: idleTimeout))
                    try channel.pipeline.syncOperations.addHandler(ScrapeHandler(render: render))
                }
            }
            .bind(host: endpoint.host, port: Int(endpoint.port))
            .get()
        let bound = channel.localAddress.map { "\($0.ipAddress ?? endpoint.host):\($0.port ?? Int(endpoint.port))" } ?? listen
        logger.info("serving Prometheus metrics", metadata: ["listen": "\(bound)"])
        return MetricsEndpoint(channel: channel, address: bound)
    }

    func stop() async {
        try? await channel.close()
    }
}

struct MetricsEndpointError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// One HTTP connection: answers each request head once its end arrives.
private final class ScrapeHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let render: @Sendable () -> [UInt8]
    private var request: HTTPRequestHead?

    init(render: @escaping @Sendable () -> [UInt8]) { self.render = render }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            request = head
        case .body:
            break  // A scrape has no body; whatever comes is dropped, not kept.
        case .end:
            guard let head = request else { return }
            request = nil
            respond(to: head, context: context)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is IdleStateHandler.IdleStateEvent { context.close(promise: nil) }
        context.fireUserInboundEventTriggered(event)
    }

    private func respond(to head: HTTPRequestHead, context: ChannelHandlerContext) {
        let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
        let (status, type, body): (HTTPResponseStatus, String, [UInt8])
        switch (head.method, path) {
        case (.GET, "/metrics"), (.HEAD, "/metrics"):
            (status, type, body) = (.ok, "text/plain; version=0.0.4; charset=utf-8", render())
        case (.GET, _), (.HEAD, _):
            (status, type, body) = (.notFound, "text/plain; charset=utf-8", Array("imagentd serves /metrics only\n".utf8))
        default:
            (status, type, body) = (.methodNotAllowed, "text/plain; charset=utf-8", Array("GET /metrics\n".utf8))
        }
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: type)
        headers.add(name: "Content-Length", value: "\(body.count)")
        if !head.isKeepAlive { headers.add(name: "Connection", value: "close") }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))), promise: nil)
        if head.method != .HEAD {
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
        }
        let channel = context.channel
        let keepAlive = head.isKeepAlive
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
            if !keepAlive { channel.close(promise: nil) }
        }
    }
}
