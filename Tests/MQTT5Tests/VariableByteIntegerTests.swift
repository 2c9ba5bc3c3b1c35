import MQTT5
import NIOCore
import Testing

/// §1.5.5: the boundaries of each length, the 4-byte limit, and the shortest form.
@Suite struct VariableByteIntegerTests {
    static let boundaries: [(value: UInt32, bytes: [UInt8])] = [
        (0, [0x00]), (127, [0x7F]),
        (128, [0x80, 0x01]), (16_383, [0xFF, 0x7F]),
        (16_384, [0x80, 0x80, 0x01]), (2_097_151, [0xFF, 0xFF, 0x7F]),
        (2_097_152, [0x80, 0x80, 0x80, 0x01]), (268_435_455, [0xFF, 0xFF, 0xFF, 0x7F]),
    ]

    @Test(arguments: 0..<8)
    func boundaryValues_encodeAsTheStandardsTable(index: Int) throws {
        let (value, bytes) = Self.boundaries[index]
        var buffer = ByteBuffer()
        #expect(VariableByteInteger.write(value, to: &buffer) == bytes.count)
        #expect(Array(buffer.readableBytesView) == bytes)
        #expect(VariableByteInteger.size(of: value) == bytes.count)
        let decoded = try #require(try VariableByteInteger.get(from: buffer, at: 0))
        #expect(decoded.value == value && decoded.size == bytes.count)
    }

    @Test func aFifthByte_isRefused() {
        let buffer = ByteBuffer(bytes: [0xFF, 0xFF, 0xFF, 0xFF, 0x7F])
        #expect(throws: MQTT5Error.malformedVariableByteInteger) { _ = try VariableByteInteger.get(from: buffer, at: 0) }
    }

    @Test(arguments: [[UInt8(0x80), 0x00], [0xFF, 0x80, 0x00], [0x80, 0x80, 0x80, 0x00]] as [[UInt8]])
    func aLongerFormThanNeeded_isRefused(bytes: [UInt8]) {
        #expect(throws: MQTT5Error.malformedVariableByteInteger) {
            _ = try VariableByteInteger.get(from: ByteBuffer(bytes: bytes), at: 0)
        }
    }

    @Test func anIncompleteInteger_isNotYetAnError() throws {
        #expect(try VariableByteInteger.get(from: ByteBuffer(bytes: [0x80, 0x80]), at: 0) == nil)
    }
}
