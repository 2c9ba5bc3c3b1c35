import IMLink
import Testing

@Suite struct CRC32CTests {
    /// Bit-at-a-time CRC-32C: slow, obviously right, the reference.
    static func reference(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
        }
        return crc ^ 0xFFFF_FFFF
    }

    @Test(arguments: [0, 1, 7, 8, 9, 31, 64, 4095, 12_288, 12_289, 40_000, 100_003])
    func agreesWithTheBitwiseReference_atEveryLengthAndAlignment(length: Int) {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<(length + 7)).map { _ in UInt8.random(in: 0...255, using: &generator) }
        for offset in 0..<8 where offset + length <= bytes.count {
            let slice = Array(bytes[offset..<(offset + length)])
            #expect(CRC32C.checksum(slice) == Self.reference(slice))
        }
    }

    @Test func updatesInPieces_equalOneUpdate() {
        let bytes = (0..<50_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        var pieces = CRC32C()
        for chunk in stride(from: 0, to: bytes.count, by: 4_999) {
            pieces.update(bytes[chunk..<min(chunk + 4_999, bytes.count)])
        }
        #expect(pieces.value == CRC32C.checksum(bytes))
    }

    /// CRC(A ‖ B) from CRC(A), CRC(B) and |B|: a frame's CRC from its header's and a body's known one.
    @Test(arguments: [0, 1, 28, 4095, 16_384, 65_536, 100_003])
    func combine_isTheCRCOfTheTwoInARow(secondLength: Int) {
        var generator = SystemRandomNumberGenerator()
        let first = (0..<28).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let second = (0..<secondLength).map { _ in UInt8.random(in: 0...255, using: &generator) }
        #expect(CRC32C.combine(CRC32C.checksum(first), CRC32C.checksum(second), secondLength: secondLength)
                == CRC32C.checksum(first + second))
    }
}
