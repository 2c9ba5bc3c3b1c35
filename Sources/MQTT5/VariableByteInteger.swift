import NIOCore

/// The Variable Byte Integer of §1.5.5: 7 bits per byte, least significant group
/// first, the high bit set on every byte but the last; at most 4 bytes.
///
/// ```
///  byte 0            byte 1               … byte 3
/// +-+-------------+ +-+-------------+      +-+-------------+
/// |C|  bits 0–6   | |C|  bits 7–13  |  …   |0|  bits 21–27 |
/// +-+-------------+ +-+-------------+      +-+-------------+
/// ```
///
/// The standard requires the shortest encoding [MQTT-1.5.5-1], so a longer one
/// (`0x80 0x00` for 0) is refused: every accepted value re-encodes to the same bytes.
public enum VariableByteInteger {
    public static let max: UInt32 = 268_435_455

    /// Bytes `value` takes on the wire (1–4).
    public static func size(of value: UInt32) -> Int {
        switch value {
        case 0..<128: 1
        case 128..<16_384: 2
        case 16_384..<2_097_152: 3
        default: 4
        }
    }

    /// Reads the integer at `index` without moving the reader.
    ///
    /// Returns nil while fewer bytes than the integer needs are there.
    public static func get(from buffer: ByteBuffer, at index: Int) throws(MQTT5Error) -> (value: UInt32, size: Int)? {
        var value: UInt32 = 0
        for position in 0..<4 {
            guard let byte = buffer.getInteger(at: index + position, as: UInt8.self) else { return nil }
            value |= UInt32(byte & 0x7F) << (7 * position)
            if byte & 0x80 == 0 {
                // A last byte of 0 after the first means a shorter form existed.
                guard position == 0 || byte != 0 else { throw .malformedVariableByteInteger }
                return (value, position + 1)
            }
        }
        throw .malformedVariableByteInteger
    }

    /// Appends `value`, which must be at most `max`.
    @discardableResult
    public static func write(_ value: UInt32, to buffer: inout ByteBuffer) -> Int {
        precondition(value <= max, "variable byte integer \(value) above \(max)")
        var rest = value
        var written = 0
        repeat {
            var byte = UInt8(rest & 0x7F)
            rest >>= 7
            if rest > 0 { byte |= 0x80 }
            written += buffer.writeInteger(byte)
        } while rest > 0
        return written
    }
}
