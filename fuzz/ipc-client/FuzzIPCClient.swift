@testable import AgentIPC
import FuzzReplay
import NIOCore
import NIOEmbedded

/// libFuzzer entry point: the Swift client's own handling of what a daemon
/// sends, on an `EmbeddedChannel` whose clock is the script's: the channel
/// handler that matches replies to requests, passes events on and fails the
/// connection, and `IPCClient.acceptWelcome`, which decides what the client
/// believes of WELCOME (its MAX_PAYLOAD then bounds every later frame).
///
/// The input is a script of command bytes: most put daemon bytes on the
/// socket; the others start a request (HELLO first, as `IPCClient.connect`
/// does), post an ACK, let time pass so that requests time out, cancel a
/// request, or make room for events.
///
/// Besides never crashing, leaking or buffering without bound: MAX_PAYLOAD as
/// the client takes it is never above `IPCClient.maxPayloadCeiling`, every
/// frame the client writes decodes, and once the connection ends every
/// request has its outcome.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzIPCClient(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let loop: EmbeddedEventLoop
    do {
        var script = IPCClientScript(FuzzInput(start, count))
        loop = script.channel.embeddedEventLoop
        script.run()
    }
    // The handler, released with the script, tells its event sequence's delegate, which queues
    // a read on the loop; a real loop runs it, this one must be told to (or the channel leaks).
    loop.run()
    return 0
}

struct IPCClientScript {
    static let requests: [IPCMessage] = [
        .status(.init()), .ping(.init()), .open(.init(service: "echo")), .open(.init(session: 7)),
        .send(.init(session: 7, payload: ByteBuffer(string: "payload"))), .close(.init(session: 7)),
        .watch(.init()), .metrics(.init()),
    ]

    var input: FuzzInput
    let channel = EmbeddedChannel()
    let handler: IPCClientChannelHandler
    /// Requests started and those that have their outcome (a reply or an error).
    var started = 0
    let finished = Counter()
    var pending: [EventLoopPromise<IPCMessage>] = []

    final class Counter { var value = 0 }

    init(_ input: FuzzInput) {
        self.input = input
        handler = IPCClientChannelHandler(channel: channel)
        try! channel.pipeline.syncOperations.addHandler(handler)
        try! channel.connect(to: SocketAddress(unixDomainSocketPath: "/fuzz.sock")).wait()
    }

    mutating func run() {
        hello()
        while let command = input.byte() {
            switch command >> 5 {
            case 0, 1, 2, 3:
                // Daemon bytes: 0–62 of them, or a 16-bit count after 0x3F.
                let length = command & 0x3F == 0x3F ? Int(input.uint16() ?? 0) : Int(command & 0x3F)
                let bytes = input.chunk(length)
                _ = try? channel.writeInbound(channel.allocator.buffer(bytes: bytes))
            case 4:
                request(Self.requests[Int(command & 0x1F) % Self.requests.count],
                        timeout: command & 0x10 == 0 ? nil : .milliseconds(Int64(command & 0x0F) * 100))
            case 5:
                let promise = channel.eventLoop.makePromise(of: Void.self)
                handler.post(.ack(.init(session: 7, seq: UInt64(command & 0x1F))), writtenPromise: promise)
            case 6:
                channel.embeddedEventLoop.advanceTime(by: .milliseconds(Int64(command & 0x1F) * 50))
            default:
                if command & 0x10 == 0, let promise = pending.popLast() {
                    handler.cancel(replyPromise: promise, with: CancellationError())
                } else {
                    handler.consumerWantsEvents()
                }
            }
            drain()
        }
        _ = try? channel.finish(acceptAlreadyClosed: true)
        drain()
        precondition(finished.value == started, "\(started - finished.value) requests have no outcome after the connection ended")
    }

    /// HELLO, and WELCOME taken as `IPCClient.connect` takes it.
    mutating func hello() {
        let handler = handler
        let promise = request(.hello(.init(ipcVersion: 1, clientName: "fuzz")), timeout: .seconds(1))
        promise.futureResult.assumeIsolated().whenSuccess { reply in
            guard let welcome = try? IPCClient.acceptWelcome(reply) else { return }
            precondition(welcome.maxPayload > 0 && welcome.maxPayload <= IPCClient.maxPayloadCeiling,
                         "MAX_PAYLOAD \(welcome.maxPayload) taken from WELCOME")
            handler.setMaxPayload(welcome.maxPayload)
        }
    }

    @discardableResult
    mutating func request(_ message: IPCMessage, timeout: Duration?) -> EventLoopPromise<IPCMessage> {
        let promise = channel.eventLoop.makePromise(of: IPCMessage.self)
        started += 1
        let finished = finished
        promise.futureResult.assumeIsolated().whenComplete { _ in finished.value += 1 }
        handler.send(message, replyPromise: promise, timeout: timeout)
        pending.append(promise)
        return promise
    }

    /// Runs the flushes the handler queued and checks what it wrote: whole frames that decode.
    func drain() {
        channel.embeddedEventLoop.run()
        while let written = try? channel.readOutbound(as: ByteBuffer.self) {
            var frame = written
            do {
                guard try IPCFrameParser.parse(&frame, maxPayload: IPCClient.maxPayloadCeiling) != nil, frame.readableBytes == 0 else {
                    preconditionFailure("the client wrote something that is not one frame: \(written.readableBytes) bytes")
                }
            } catch {
                preconditionFailure("the client wrote a frame that does not decode: \(error)")
            }
        }
    }
}

#if !FUZZING
@main
struct ReplayIPCClientInputs {
    static func main() { replayInputs(tool: "fuzz-ipc-client", through: fuzzIPCClient) }
}
#endif
