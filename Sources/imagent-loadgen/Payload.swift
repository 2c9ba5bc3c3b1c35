import NIOCore

/// What every message carries, so the receiver can check it came back
/// whole, on the right session, with the right number:
///
/// ```
/// 0      4        8                16
/// +------+--------+----------------+------------------------------+
/// | tag  | index  | message number | filler: byte i = (n + i) & FF |
/// +------+--------+----------------+------------------------------+
///   u32    u32      u64 (1, 2, …)    up to --size bytes
/// ```
enum Payload {
    static let headerSize = 16

    static func make(tag: UInt32, index: UInt32, number: UInt64, size: Int) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(size)
        buffer.writeInteger(tag)
        buffer.writeInteger(index)
        buffer.writeInteger(number)
        for offset in headerSize..<size { buffer.writeInteger(UInt8(truncatingIfNeeded: number &+ UInt64(offset))) }
        return buffer
    }

    /// The message number, if the payload is one this process sent on session `index`, intact.
    static func number(in payload: ByteBuffer, tag: UInt32, index: UInt32, size: Int) -> UInt64? {
        guard payload.readableBytes == size,
              payload.getInteger(at: payload.readerIndex, as: UInt32.self) == tag,
              payload.getInteger(at: payload.readerIndex + 4, as: UInt32.self) == index,
              let number = payload.getInteger(at: payload.readerIndex + 8, as: UInt64.self) else { return nil }
        let intact = payload.withUnsafeReadableBytes { bytes in
            (headerSize..<size).allSatisfy { bytes[$0] == UInt8(truncatingIfNeeded: number &+ UInt64($0)) }
        }
        return intact ? number : nil
    }
}
