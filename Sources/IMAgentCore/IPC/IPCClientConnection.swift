import AgentIPC
import NIOCore

/// The daemon's side of one connected local program. Lives on the daemon's
/// event loop; every method must be called there.
final class IPCClientConnection {
    let id: UInt64
    let peer: PeerCredentials
    private let policy: AdminPolicy
    private let channel: Channel
    private let unsent: UnsentReplies
    /// Root or a member of the admin group: asked only when a request needs it.
    private(set) lazy var isAdmin: Bool = policy.isAdmin(peer) { PeerCredentials.groups(of: channel) }
    /// CLIENT_NAME from HELLO, for logs.
    var name = ""
    var greeted = false
    /// Subscribed to EVENT frames (WATCH).
    var watching = false
    /// A flush is queued on the loop for what was written in this turn.
    private var flushScheduled = false
    /// Frames of this turn, encoded and not yet handed to the channel: one channel write per
    /// turn (or per `handOverBytes`) instead of a trip through the pipeline per frame.
    private var outgoing: ByteBuffer?
    /// Bytes of replies and events (not MESSAGEs) in `outgoing`, for `UnsentReplies`.
    private var outgoingReplyBytes = 0

    /// Encoded bytes go to the channel in pieces of about this size, so its writability (which
    /// pauses delivery to a slow client) still follows what was written within a turn.
    static let handOverBytes = 16 * 1024

    /// Bytes the daemon may queue for a client beyond the channel's high water
    /// mark before it gives up on that client: replies and small events only,
    /// as message delivery itself stops while the channel is not writable.
    static let queuedBytesLimit = 8 << 20

    init(id: UInt64, peer: PeerCredentials, policy: AdminPolicy, channel: Channel, unsent: UnsentReplies) {
        self.id = id
        self.peer = peer
        self.policy = policy
        self.channel = channel
        self.unsent = unsent
    }

    /// False while the client is not reading fast enough: stop sending it messages.
    var isWritable: Bool { channel.isWritable }

    /// For logs: CLIENT_NAME is the client's own text, so it is cut short.
    var label: String { name.isEmpty ? "client \(id) (\(peer))" : "client \(id) \"\(LogText.bounded(name))\" (\(peer))" }

    /// The loop this client is served on (for the log's timers).
    var eventLoop: any EventLoop { channel.eventLoop }

    func reply(to request: UInt32, _ message: IPCMessage) {
        guard request != 0 || !message.isSilentSuccess else { return }
        write(IPCFrame(request: request, message: message))
    }

    func fail(_ request: UInt32, _ code: IPCErrorCode, _ text: String) {
        write(IPCFrame(request: request, message: .error(.init(code: code, message: text))))
    }

    func send(event: IPCMessage) {
        write(.event(event))
    }

    /// Sends a last ERROR and closes: for protocol violations and shutdown.
    func closeWithError(request: UInt32 = 0, _ code: IPCErrorCode, _ text: String) {
        handOver()
        let frame = IPCFrame(request: request, message: .error(.init(code: code, message: text)))
        let channel = self.channel
        // A client that stops reading never completes the write: close it anyway after a bound.
        let deadline = channel.eventLoop.scheduleTask(in: Self.closeTimeout) { channel.close(promise: nil) }
        channel.writeAndFlush(frame.encoded(allocator: channel.allocator)).whenComplete { _ in
            deadline.cancel()
            channel.close(promise: nil)
        }
    }

    /// How long a last ERROR may take to leave before the connection is closed without it.
    static let closeTimeout: TimeAmount = .seconds(2)

    func close() {
        channel.close(promise: nil)
    }

    /// Stops (false) or resumes (true) reading the client's socket: its SENDs wait for the
    /// store (see `MemoryBudget`), and the kernel holds the next ones in the client meanwhile.
    func setReading(_ on: Bool) {
        waitingForStore = !on
        applyReading()
    }

    /// Its channel is not writable: nothing more is read until it is (`resumeAfterWritable`).
    func pauseReadingUntilWritable() {
        guard !waitingUntilWritable else { return }
        waitingUntilWritable = true
        applyReading()
    }

    /// The client read what waited for it: reading goes on. Returns whether it had paused
    /// (then frames may wait, decoded no further, in the decoder's buffer).
    func resumeAfterWritable() -> Bool {
        guard waitingUntilWritable else { return false }
        waitingUntilWritable = false
        applyReading()
        return true
    }

    private var waitingForStore = false
    private var waitingUntilWritable = false

    private func applyReading() {
        try? channel.syncOptions?.setOption(ChannelOptions.autoRead, value: !waitingForStore && !waitingUntilWritable)
    }

    private func write(_ frame: IPCFrame) {
        if outgoing == nil { outgoing = channel.allocator.buffer(capacity: 512) }
        let before = outgoing!.readableBytes
        let payload = frame.encode(into: &outgoing!, leavingPayloadFrom: Self.handOverBytes)
        if case .message = frame.message {} else { outgoingReplyBytes += outgoing!.readableBytes - before }
        if let payload {
            // A large MESSAGE payload follows its frame's head as the buffer it is (the window
            // holds it until the client's ACK anyway): one more iovec, no copy.
            if handOver() { channel.write(payload, promise: nil) }
        } else if outgoing!.readableBytes >= Self.handOverBytes {
            handOver()
        }
        scheduleFlush()
    }

    /// Gives what is encoded to the channel (unflushed), unless the client has let more than
    /// `queuedBytesLimit` pile up there, or its uid more than `UnsentReplies` allows: a client
    /// that reads nothing while it keeps asking would otherwise grow the daemon without bound.
    /// False when it closed the connection instead.
    @discardableResult
    private func handOver() -> Bool {
        guard let bytes = outgoing else { return true }
        let replyBytes = outgoingReplyBytes
        outgoing = nil
        outgoingReplyBytes = 0
        let pending = (try? channel.syncOptions?.getOption(ChannelOptions.bufferedWritableBytes)) ?? 0
        guard pending <= Self.queuedBytesLimit, replyBytes == 0 || unsent.admit(replyBytes, for: self) else {
            channel.close(promise: nil)
            return false
        }
        guard replyBytes > 0 else {
            channel.write(bytes, promise: nil)
            return true
        }
        let written = channel.eventLoop.makePromise(of: Void.self)
        written.futureResult.assumeIsolated().whenComplete { [self] _ in unsent.written(replyBytes, for: self) }
        channel.write(bytes, promise: written)
        return true
    }

    /// One flush, so one `writev`, for everything written to this client in one turn
    /// of the loop (a group commit's ACCEPTED replies, a batch of MESSAGEs), instead
    /// of one system call per frame. The flush runs as soon as the current work on
    /// the loop is done, so a lone reply is not delayed.
    private func scheduleFlush() {
        guard !flushScheduled else { return }
        flushScheduled = true
        channel.eventLoop.assumeIsolated().execute { [self] in
            flushScheduled = false
            handOver()
            channel.flush()
        }
    }
}

extension IPCMessage {
    /// OK to a request with id 0 is not sent at all (`ipc.md` §2).
    var isSilentSuccess: Bool {
        if case .ok = self { return true }
        return false
    }
}
