import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads admin commands, one per line, from a Unix socket connection or a
/// pipe (stdin), and writes each reply as one line.
final class AdminLineHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// A longer line is not a command; refusing it bounds the buffer.
    static let maxLineLength = 4096

    private let core: ServerCore
    /// Where replies go when the channel cannot write (see `RefServer.serveCommands`).
    private let replyDescriptor: CInt?
    private var pending = ByteBuffer()

    init(core: ServerCore, replyDescriptor: CInt? = nil) {
        self.core = core
        self.replyDescriptor = replyDescriptor
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        pending.writeBuffer(&bytes)
        while let newline = pending.readableBytesView.firstIndex(of: UInt8(ascii: "\n")) {
            let length = newline - pending.readerIndex
            var line = pending.readString(length: length) ?? ""
            pending.moveReaderIndex(forwardBy: 1)
            if line.hasSuffix("\r") { line.removeLast() }
            guard !line.allSatisfy({ $0 == " " || $0 == "\t" }) else { continue }
            reply(execute(line), context: context)
        }
        if pending.readableBytes > Self.maxLineLength {
            pending.clear()
            reply("error line longer than \(Self.maxLineLength) bytes", context: context)
        }
        pending.discardReadBytes()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        core.logger.debug("admin channel failed: \(error)")
        context.close(promise: nil)
    }

    private func execute(_ line: String) -> String {
        core.logger.info("admin: \(line)")
        do {
            return core.execute(try AdminCommand.parse(line))
        } catch {
            return "error \(error)"
        }
    }

    private func reply(_ text: String, context: ChannelHandlerContext) {
        if let replyDescriptor {
            var line = Array((text + "\n").utf8)[...]
            while !line.isEmpty {
                let written = line.withUnsafeBytes { write(replyDescriptor, $0.baseAddress, $0.count) }
                if written < 0, errno == EINTR { continue }
                guard written > 0 else { return }
                line = line.dropFirst(written)
            }
            return
        }
        var buffer = context.channel.allocator.buffer(capacity: text.utf8.count + 1)
        buffer.writeString(text)
        buffer.writeString("\n")
        context.writeAndFlush(wrapOutboundOut(buffer), promise: nil)
    }
}
