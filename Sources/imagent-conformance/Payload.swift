import NIOCore

/// Message *i* of a session (counting from 1): *i* as a big-endian u64, then the byte `i % 251`
/// repeated up to `size` bytes.
enum Payload {
    static func make(_ number: UInt64, size: Int) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(size)
        buffer.writeInteger(number)
        buffer.writeRepeatingByte(filler(number), count: max(0, size - 8))
        return buffer
    }

    /// The counter of an intact message of `size` bytes; nil when it is corrupt.
    static func number(in payload: ByteBuffer, size: Int) -> UInt64? {
        guard payload.readableBytes == size, let number = payload.getInteger(at: payload.readerIndex, as: UInt64.self) else {
            return nil
        }
        let byte = filler(number)
        let intact = payload.withUnsafeReadableBytes { $0.dropFirst(8).allSatisfy { $0 == byte } }
        return intact ? number : nil
    }

    private static func filler(_ number: UInt64) -> UInt8 { UInt8(number % 251) }
}
