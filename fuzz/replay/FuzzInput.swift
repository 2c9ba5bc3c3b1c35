/// A fuzz input read as a script: command bytes, counts and chunks taken from
/// the front, so one byte string chooses both the events and their data.
/// Reading past the end gives nil (or what is left), never a trap.
public struct FuzzInput {
    private let bytes: [UInt8]
    private var index = 0

    public init(_ start: UnsafeRawPointer, _ count: Int) {
        bytes = Array(UnsafeRawBufferPointer(start: start, count: count))
    }

    public var isEmpty: Bool { index >= bytes.count }

    public mutating func byte() -> UInt8? {
        guard index < bytes.count else { return nil }
        defer { index += 1 }
        return bytes[index]
    }

    /// A big-endian UInt16, or nil when fewer than two bytes are left.
    public mutating func uint16() -> UInt16? {
        guard index + 2 <= bytes.count else { return nil }
        defer { index += 2 }
        return UInt16(bytes[index]) << 8 | UInt16(bytes[index + 1])
    }

    /// The next `count` bytes, or all that are left.
    public mutating func chunk(_ count: Int) -> ArraySlice<UInt8> {
        let end = min(bytes.count, index + max(0, count))
        defer { index = end }
        return bytes[index..<end]
    }
}
