/// The MQTT Control Packet type, the high nibble of the fixed header's first byte (§2.1.2).
public enum PacketType: UInt8, Hashable, Sendable, CustomStringConvertible {
    case connect = 1
    case connack = 2
    case publish = 3
    case puback = 4
    case pubrec = 5
    case pubrel = 6
    case pubcomp = 7
    case subscribe = 8
    case suback = 9
    case unsubscribe = 10
    case unsuback = 11
    case pingreq = 12
    case pingresp = 13
    case disconnect = 14
    case auth = 15

    /// The flags §2.1.3 requires in the low nibble; nil for PUBLISH, whose flags carry DUP, QoS and RETAIN.
    var requiredFlags: UInt8? {
        switch self {
        case .publish: nil
        case .pubrel, .subscribe, .unsubscribe: 0b0010
        case .connect, .connack, .puback, .pubrec, .pubcomp, .suback, .unsuback, .pingreq, .pingresp, .disconnect, .auth: 0
        }
    }

    public var description: String {
        switch self {
        case .connect: "CONNECT"
        case .connack: "CONNACK"
        case .publish: "PUBLISH"
        case .puback: "PUBACK"
        case .pubrec: "PUBREC"
        case .pubrel: "PUBREL"
        case .pubcomp: "PUBCOMP"
        case .subscribe: "SUBSCRIBE"
        case .suback: "SUBACK"
        case .unsubscribe: "UNSUBSCRIBE"
        case .unsuback: "UNSUBACK"
        case .pingreq: "PINGREQ"
        case .pingresp: "PINGRESP"
        case .disconnect: "DISCONNECT"
        case .auth: "AUTH"
        }
    }
}

/// Quality of Service of a message (§4.3).
public enum QoS: UInt8, Hashable, Sendable, Comparable {
    case atMostOnce = 0
    case atLeastOnce = 1
    case exactlyOnce = 2

    public static func < (lhs: QoS, rhs: QoS) -> Bool { lhs.rawValue < rhs.rawValue }
}
