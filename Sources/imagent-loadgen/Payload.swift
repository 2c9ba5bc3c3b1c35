#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
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
///
/// The filler is written and checked 256 bytes at a time, as slices of one
/// table: the test suite runs debug builds, where a loop over each byte of a
/// 16 KiB payload costs the loadgen more than the daemon spends on the message.
enum Payload {
    static let headerSize = 16

    /// 0…255 twice: the filler's next 256 bytes, from any offset, are one slice of it.
    private static let cycle: [UInt8] = (0..<512).map { UInt8(truncatingIfNeeded: $0) }

    static func make(tag: UInt32, index: UInt32, number: UInt64, size: Int) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(size)
        buffer.writeInteger(tag)
        buffer.writeInteger(index)
        buffer.writeInteger(number)
        cycle.withUnsafeBytes { cycle in
            forEachFillerRun(number: number, size: size) { offset, start, count in
                buffer.writeBytes(UnsafeRawBufferPointer(rebasing: cycle[start..<start + count]))
            }
        }
        return buffer
    }

    /// The message number, if the payload is one this process sent on session `index`, intact.
    static func number(in payload: ByteBuffer, tag: UInt32, index: UInt32, size: Int) -> UInt64? {
        guard payload.readableBytes == size,
              payload.getInteger(at: payload.readerIndex, as: UInt32.self) == tag,
              payload.getInteger(at: payload.readerIndex + 4, as: UInt32.self) == index,
              let number = payload.getInteger(at: payload.readerIndex + 8, as: UInt64.self) else { return nil }
        var intact = true
        payload.withUnsafeReadableBytes { bytes in
            cycle.withUnsafeBytes { cycle in
                forEachFillerRun(number: number, size: size) { offset, start, count in
                    if intact, memcmp(bytes.baseAddress! + offset, cycle.baseAddress! + start, count) != 0 { intact = false }
                }
            }
        }
        return intact ? number : nil
    }

    /// The filler as runs of at most 256 bytes: each run's offset in the payload, and where
    /// in `cycle` its bytes start.
    private static func forEachFillerRun(number: UInt64, size: Int, _ body: (_ offset: Int, _ start: Int, _ count: Int) -> Void) {
        var offset = headerSize
        while offset < size {
            let count = min(256, size - offset)
            body(offset, Int(UInt8(truncatingIfNeeded: number &+ UInt64(offset))), count)
            offset += count
        }
    }
}
