import CCRC32C
import NIOCore

/// CRC-32C (Castagnoli, reflected, init and xorout `0xFFFFFFFF`), the checksum
/// of every IMLink frame. The check value of ASCII `123456789` is `0xE3069283`.
public struct CRC32C: Sendable, Equatable {
    private var state: UInt32 = 0xFFFF_FFFF

    public init() {}

    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress else { return }
        state = imagent_crc32c_update(state, base, bytes.count)
    }

    public mutating func update(_ buffer: ByteBuffer) {
        buffer.withUnsafeReadableBytes { update($0) }
    }

    public mutating func update(_ bytes: some Sequence<UInt8>) {
        let handled: Void? = bytes.withContiguousStorageIfAvailable { update(UnsafeRawBufferPointer($0)) }
        if handled == nil {
            Array(bytes).withUnsafeBytes { update($0) }
        }
    }

    public var value: UInt32 { state ^ 0xFFFF_FFFF }

    public static func checksum(_ bytes: some Sequence<UInt8>) -> UInt32 {
        var crc = CRC32C()
        crc.update(bytes)
        return crc.value
    }

    /// The CRC of `buffer`'s readable bytes.
    public static func checksum(_ buffer: ByteBuffer) -> UInt32 {
        var crc = CRC32C()
        crc.update(buffer)
        return crc.value
    }

    /// The CRC of `A` followed by `B`, from `CRC(A)`, `CRC(B)` and the length of `B`: a
    /// frame's CRC from its header's and a body's computed before, without reading the body.
    public static func combine(_ first: UInt32, _ second: UInt32, secondLength: Int) -> UInt32 {
        imagent_crc32c_shift(first, secondLength) ^ second
    }

    /// True when the CPU's `crc32` instruction computes it (reported by benchmarks).
    public static var isHardwareAccelerated: Bool { imagent_crc32c_is_hardware() != 0 }
}
