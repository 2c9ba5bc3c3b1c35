/// The code points a conforming MQTT 5 receiver may refuse in a UTF-8 Encoded
/// String (§1.5.4): U+0000 and the surrogates it must refuse (a Swift string
/// holds no surrogate), and the control characters and noncharacters it may
/// refuse. mosquitto refuses them all in a topic with DISCONNECT 0x81, so a
/// string that carries one cannot be sent to every broker.
public enum RefusableCodePoints {
    /// Why a broker may refuse `scalar`; nil for a code point every broker accepts.
    public static func reason(_ scalar: Unicode.Scalar) -> String? {
        let value = scalar.value
        switch value {
        case 0x0000: return "U+0000 is not allowed in MQTT strings"
        case 0x0001...0x001F, 0x007F...0x009F: return "\(name(scalar)) is a control character"
        case 0xFDD0...0xFDEF: return "\(name(scalar)) is a noncharacter"
        // U+FFFE and U+FFFF of every plane.
        case _ where value & 0xFFFE == 0xFFFE: return "\(name(scalar)) is a noncharacter"
        default: return nil
        }
    }

    /// The first refusable code point of `string` and why; nil if there is none.
    public static func first(in string: String) -> (scalar: Unicode.Scalar, reason: String)? {
        for scalar in string.unicodeScalars {
            if let reason = reason(scalar) { return (scalar, reason) }
        }
        return nil
    }

    /// `string` with its refusable code points written `\u{1B}`, for a log line or an error message.
    public static func escaped(_ string: String) -> String {
        var text = ""
        for scalar in string.unicodeScalars {
            if reason(scalar) != nil {
                text += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            } else {
                text.unicodeScalars.append(scalar)
            }
        }
        return text
    }

    /// `U+001B`: the code point by number, as it may not be printable.
    public static func name(_ scalar: Unicode.Scalar) -> String {
        let hex = String(scalar.value, radix: 16, uppercase: true)
        return "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }
}
