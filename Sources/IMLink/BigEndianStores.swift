import NIOCore

/// Fixed-size headers written in one go: one capacity check and plain stores, instead of
/// one `ByteBuffer.writeInteger` per field (each checks capacity and uniqueness and calls
/// `memcpy`: about 200 instructions, nine times for an IMLink header, on every message).
extension ByteBuffer {
    /// Appends exactly `count` bytes, which `fill` stores in order through the cursor.
    @inlinable
    public mutating func writeBigEndian(count: Int, _ fill: (inout BigEndianCursor) -> Void) {
        writeWithUnsafeMutableBytes(minimumWritableBytes: count) { bytes in
            var cursor = BigEndianCursor(UnsafeMutableRawBufferPointer(rebasing: bytes.prefix(count)))
            fill(&cursor)
            precondition(cursor.offset == count, "\(cursor.offset) bytes stored where \(count) were reserved")
            return count
        }
    }
}

/// Where the next integer of a `writeBigEndian` header goes.
public struct BigEndianCursor {
    @usableFromInline let bytes: UnsafeMutableRawBufferPointer
    @usableFromInline var offset = 0

    @inlinable init(_ bytes: UnsafeMutableRawBufferPointer) {
        self.bytes = bytes
    }

    /// Stores `value` in network byte order after the previous one (bounds-checked).
    @inlinable
    public mutating func put<I: FixedWidthInteger>(_ value: I) {
        precondition(offset + MemoryLayout<I>.size <= bytes.count, "header overrun")
        bytes.storeBytes(of: value.bigEndian, toByteOffset: offset, as: I.self)
        offset += MemoryLayout<I>.size
    }
}
