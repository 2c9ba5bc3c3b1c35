import NIOCore
import NIOPosix

/// Sends one admin command over the server's Unix socket and returns the reply line.
enum AdminClient {
    private final class ReplyReader: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        let reply: EventLoopPromise<String>
        private var received = ByteBuffer()

        init(reply: EventLoopPromise<String>) { self.reply = reply }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var bytes = unwrapInboundIn(data)
            received.writeBuffer(&bytes)
            if let newline = received.readableBytesView.firstIndex(of: UInt8(ascii: "\n")) {
                reply.succeed(received.readString(length: newline - received.readerIndex) ?? "")
                context.close(promise: nil)
            }
        }

        func channelInactive(context: ChannelHandlerContext) {
            reply.fail(TestTimeout(what: "an admin reply before the socket closed"))
        }
    }

    static func send(_ line: String, socket path: String) async throws -> String {
        let group = MultiThreadedEventLoopGroup.singleton
        let loop = group.next()
        let reply = loop.makePromise(of: String.self)
        let channel = try await ClientBootstrap(group: loop)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ReplyReader(reply: reply))
                }
            }
            .connect(unixDomainSocketPath: path)
            .get()
        try await channel.writeAndFlush(ByteBuffer(string: line + "\n")).get()
        let timeout = loop.scheduleTask(in: .seconds(5)) { reply.fail(TestTimeout(what: "the reply to \"\(line)\"")) }
        defer { timeout.cancel() }
        return try await reply.futureResult.get()
    }
}
