import NIOCore

/// Reads the data types of §1.5 from one packet's bytes after the fixed header.
///
/// Every read checks its length against what remains of the Remaining Length
/// before it allocates anything, and names the field it was reading when the
/// packet ends too soon.
struct PacketReader {
    let type: PacketType
    private(set) var buffer: ByteBuffer

    init(type: PacketType, body: ByteBuffer) {
        self.type = type
        self.buffer = body
    }

    var remaining: Int { buffer.readableBytes }

    mutating func byte(_ field: @autoclosure () -> String) throws(MQTT5Error) -> UInt8 {
        guard let value = buffer.readInteger(as: UInt8.self) else { throw .truncated(type, field: field()) }
        return value
    }

    /// Two Byte Integer, big-endian (§1.5.2).
    mutating func uint16(_ field: @autoclosure () -> String) throws(MQTT5Error) -> UInt16 {
        guard let value = buffer.readInteger(as: UInt16.self) else { throw .truncated(type, field: field()) }
        return value
    }

    /// Four Byte Integer, big-endian (§1.5.3).
    mutating func uint32(_ field: @autoclosure () -> String) throws(MQTT5Error) -> UInt32 {
        guard let value = buffer.readInteger(as: UInt32.self) else { throw .truncated(type, field: field()) }
        return value
    }

    mutating func variableInteger(_ field: @autoclosure () -> String) throws(MQTT5Error) -> UInt32 {
        guard let (value, size) = try VariableByteInteger.get(from: buffer, at: buffer.readerIndex) else {
            throw .truncated(type, field: field())
        }
        buffer.moveReaderIndex(forwardBy: size)
        return value
    }

    /// Binary Data: a Two Byte Integer length, then that many bytes (§1.5.6). A slice: nothing is copied.
    mutating func binary(_ field: @autoclosure () -> String) throws(MQTT5Error) -> ByteBuffer {
        let length = try uint16(field())
        guard let value = buffer.readSlice(length: Int(length)) else { throw .truncated(type, field: field()) }
        return value
    }

    /// UTF-8 Encoded String (§1.5.4): well-formed UTF-8 — so no surrogates and no
    /// overlong forms — and no U+0000 [MQTT-1.5.4-1, -2].
    ///
    /// Other control characters and noncharacters, which the standard lets a
    /// receiver refuse but does not require it to, are accepted.
    mutating func string(_ field: @autoclosure () -> String) throws(MQTT5Error) -> String {
        let bytes = try binary(field())
        return try MQTTString.validated(bytes, field: field())
    }

    /// The next `length` bytes as a reader of their own (a property list).
    mutating func subReader(length: Int, field: @autoclosure () -> String) throws(MQTT5Error) -> PacketReader {
        guard let slice = buffer.readSlice(length: length) else { throw .truncated(type, field: field()) }
        return PacketReader(type: type, body: slice)
    }

    /// The rest of the packet (a PUBLISH payload, a list of topic filters).
    mutating func rest() -> ByteBuffer {
        buffer.readSlice(length: buffer.readableBytes)!
    }

    /// Refuses bytes left after the last field.
    func finish() throws(MQTT5Error) {
        guard buffer.readableBytes == 0 else { throw .trailingBytes(type, count: buffer.readableBytes) }
    }
}

/// The UTF-8 string rules of §1.5.4, shared by the reader and the writer.
public enum MQTTString {
    public static let maxLength = 65_535

    static func validated(_ bytes: ByteBuffer, field: @autoclosure () -> String) throws(MQTT5Error) -> String {
        let string = bytes.withUnsafeReadableBytes { String(validating: $0, as: UTF8.self) }
        guard let string else { throw .invalidString(field: field(), reason: "not well-formed UTF-8") }
        guard !bytes.readableBytesView.contains(0) else { throw .invalidString(field: field(), reason: "contains U+0000") }
        return string
    }

    /// Throws if `string` cannot travel as a UTF-8 Encoded String. Swift strings
    /// are always well-formed, so only U+0000 and the length are left to check.
    public static func check(_ string: String, field: @autoclosure () -> String) throws(MQTT5Error) {
        guard string.utf8.count <= maxLength else {
            throw .invalidString(field: field(), reason: "\(string.utf8.count) bytes; at most \(maxLength) can be encoded")
        }
        guard !string.utf8.contains(0) else { throw .invalidString(field: field(), reason: "contains U+0000") }
    }
}

extension ByteBuffer {
    mutating func writeMQTTString(_ string: String, field: @autoclosure () -> String) throws(MQTT5Error) {
        try MQTTString.check(string, field: field())
        writeInteger(UInt16(string.utf8.count))
        writeString(string)
    }

    mutating func writeMQTTBinary(_ bytes: ByteBuffer, field: @autoclosure () -> String) throws(MQTT5Error) {
        guard bytes.readableBytes <= 65_535 else { throw .binaryTooLong(field: field(), length: bytes.readableBytes) }
        writeInteger(UInt16(bytes.readableBytes))
        writeImmutableBuffer(bytes)
    }
}
