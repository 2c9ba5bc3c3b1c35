import MQTT5
import Testing

/// The code points a broker may refuse in a topic (§1.5.4), each class at its
/// boundaries, and the service names they make `SessionTopics` refuse.
@Suite struct RefusableCodePointsTests {
    /// Every class and its edges: refused.
    static let refused: [UInt32] = [
        0x0000,                                      // U+0000: refused by every receiver
        0x0001, 0x0007, 0x0009, 0x000A, 0x001B, 0x001F,  // C0 controls
        0x007F, 0x0080, 0x0085, 0x009B, 0x009F,          // DEL and C1
        0xFDD0, 0xFDDF, 0xFDEF,                          // the noncharacter block of Arabic Presentation Forms-A
        0xFFFE, 0xFFFF, 0x1FFFE, 0x1FFFF, 0x2FFFE, 0xEFFFF, 0xFFFFE, 0xFFFFF, 0x10FFFE, 0x10FFFF, // the last two of every plane
    ]
    /// The neighbours of each class, and other text a broker takes: accepted.
    static let accepted: [UInt32] = [
        0x0020, 0x0021, 0x007E, 0x00A0, 0x00E9, 0x00FF,
        0xFDCF, 0xFDF0, 0xFFFD, 0xFEFF, 0x10000, 0x1FFFD, 0x20000, 0x10FFFD,
        0x2028, 0x2029, 0x202E, 0x1F600,               // separators, a bidi override, an emoji: valid in a topic
        0xD7FF, 0xE000,                                // around the surrogates (a Swift string cannot hold one)
    ]

    @Test(arguments: refused)
    func aRefusableCodePoint_isNamed_andMakesTheServiceRefused(value: UInt32) throws {
        let scalar = try #require(Unicode.Scalar(value))
        let reason = try #require(RefusableCodePoints.reason(scalar))
        #expect(reason.contains(RefusableCodePoints.name(scalar)))
        let service = "echo" + String(Character(scalar)) + "x"
        #expect(throws: SessionTopics.NamingError.self) { try SessionTopics.checkService(service) }
        #expect(throws: SessionTopics.NamingError.self) { try SessionTopics.checkService(String(Character(scalar))) }
        #expect(throws: SessionTopics.NamingError.self) { _ = try SessionTopics(prefix: "imagent", clientID: service) }
        #expect(throws: SessionTopics.NamingError.self) { _ = try SessionTopics(prefix: "a/" + service, clientID: "c") }
    }

    @Test(arguments: accepted)
    func anyOtherCodePoint_isAccepted(value: UInt32) throws {
        let scalar = try #require(Unicode.Scalar(value))
        #expect(RefusableCodePoints.reason(scalar) == nil)
        try SessionTopics.checkService("echo" + String(Character(scalar)))
    }

    @Test func everyScalar_isRefusedExactlyWhenItIsAControlOrANoncharacter() {
        var refused = 0
        for value in UInt32(0)...0x10FFFF {
            guard let scalar = Unicode.Scalar(value) else { continue }
            let control = value <= 0x1F || (0x7F...0x9F).contains(value)
            let noncharacter = (0xFDD0...0xFDEF).contains(value) || value & 0xFFFF >= 0xFFFE
            if (RefusableCodePoints.reason(scalar) != nil) != (control || noncharacter) {
                Issue.record("U+\(String(value, radix: 16)) is misclassified")
            }
            if control || noncharacter { refused += 1 }
        }
        // 32 C0 + 33 DEL and C1 + 32 in U+FDD0–U+FDEF + 2 × 17 planes.
        #expect(refused == 32 + 33 + 32 + 34)
    }

    @Test func escaped_writesRefusableCodePointsAsEscapes_andKeepsTheRest() {
        let nonFFFF = String(Character(Unicode.Scalar(UInt32(0xFFFF))!))
        #expect(RefusableCodePoints.escaped("a\u{1B}]0;x\u{7}é\u{9B}" + nonFFFF) == "a\\u{1B}]0;x\\u{7}é\\u{9B}\\u{FFFF}")
        #expect(RefusableCodePoints.name(Unicode.Scalar(0x1B)) == "U+001B")
        #expect(RefusableCodePoints.name(Unicode.Scalar(0x10FFFF)!) == "U+10FFFF")
        let error = #expect(throws: SessionTopics.NamingError.self) { try SessionTopics.checkService("x\u{1B}[31m") }
        #expect(error?.description == "service \"x\\u{1B}[31m\" cannot be used in an MQTT topic: U+001B is a control character")
    }
}
