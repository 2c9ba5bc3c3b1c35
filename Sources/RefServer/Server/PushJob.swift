import NIOCore

/// A stream of generated server→agent messages for one session.
struct PushJob: Sendable {
    let key: SessionKey
    var remaining: Int
    let size: Int
    /// Messages per second; 0 means all at once.
    let rate: Int
    /// How many this job produced, for the payload text.
    var produced = 0
    var timer: Scheduled<Void>?

    /// The tick and how many messages each tick produces: at most 100 ticks a
    /// second, so high rates come in small batches instead of a timer storm.
    var schedule: (interval: TimeAmount, perTick: Int) {
        guard rate > 0 else { return (.zero, remaining) }
        if rate <= 100 { return (.nanoseconds(1_000_000_000 / Int64(rate)), 1) }
        return (.milliseconds(10), (rate + 99) / 100)
    }

    /// A recognisable payload: "push <session> #<n> " padded with dots to `size` bytes.
    static func payload(session: UInt64, number: Int, size: Int) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(size)
        let head = Array("push \(session) #\(number) ".utf8.prefix(size))
        buffer.writeBytes(head)
        buffer.writeRepeatingByte(UInt8(ascii: "."), count: size - head.count)
        return buffer
    }
}
