import NIOCore

/// One direction of a proxied connection. Each chunk is held for a random
/// delay in the range, but never released before the chunk ahead of it, so
/// the bytes keep their order and only their timing jitters:
///
/// ```
/// read:     A(t=0, +700 ms)   B(t=10, +250 ms)   C(t=20, +400 ms)
/// release:  A at 700          B at 700 (not 260) C at 700 (not 420)
/// ```
///
/// Lives on the event loop of both channels of the pair; not thread-safe.
public final class DelayLine {
    private let peer: Channel
    private let delays: DelayRange
    private var random: SplitMix64
    private var queue = CircularBuffer<ByteBuffer>()
    private var lastRelease = NIODeadline.uptimeNanoseconds(0)
    private var closeWhenEmpty = false

    public init(peer: Channel, delays: DelayRange, random: SplitMix64) {
        self.peer = peer
        self.delays = delays
        self.random = random
    }

    /// Queues `bytes`; they are written to the peer at their release time.
    public func push(_ bytes: ByteBuffer) {
        let span = UInt64(delays.maxMS - delays.minMS + 1)
        let delay = TimeAmount.milliseconds(Int64(delays.minMS) + Int64(random.next() % span))
        let release = max(NIODeadline.now() + delay, lastRelease)
        lastRelease = release
        queue.append(bytes)
        let line = NIOLoopBound(self, eventLoop: peer.eventLoop)
        peer.eventLoop.scheduleTask(deadline: release) { line.value.releaseOne() }
    }

    /// The source closed: close the peer once everything queued has gone out.
    public func finish() {
        closeWhenEmpty = true
        if queue.isEmpty { peer.close(promise: nil) }
    }

    /// Releases the oldest chunk: timers with equal deadlines may fire in any
    /// order, but each firing takes the head, so the order holds regardless.
    private func releaseOne() {
        if let bytes = queue.popFirst() { peer.writeAndFlush(bytes, promise: nil) }
        if queue.isEmpty, closeWhenEmpty { peer.close(promise: nil) }
    }
}

/// A one-way delay range in milliseconds (`200`, or `150-450`: each chunk draws its own).
public struct DelayRange: Sendable, Equatable {
    public var minMS: Int
    public var maxMS: Int

    public init(minMS: Int, maxMS: Int) {
        self.minMS = minMS
        self.maxMS = maxMS
    }

    public init?(parsing text: String) {
        let parts = text.split(separator: "-").map { Int($0) }
        guard (1...2).contains(parts.count), let low = parts.first ?? nil, let high = parts.last ?? nil,
              low >= 0, high >= low else { return nil }
        self.init(minMS: low, maxMS: high)
    }

    public var description: String { minMS == maxMS ? "\(minMS)" : "\(minMS)-\(maxMS)" }
}
