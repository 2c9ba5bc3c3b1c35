/// The Reason Codes of §2.4, one value per byte.
///
/// Several names share a byte: 0x00 is Success, Normal disconnection (DISCONNECT)
/// and Granted QoS 0 (SUBACK); those aliases are static members. Which codes a
/// packet may carry is the standard's table in §2.4, `isAllowed(in:)`; a decoder
/// refuses any other [MQTT-3.4.2-1 and its siblings].
public enum ReasonCode: UInt8, Hashable, Sendable {
    case success = 0x00
    case grantedQoS1 = 0x01
    case grantedQoS2 = 0x02
    case disconnectWithWillMessage = 0x04
    case noMatchingSubscribers = 0x10
    case noSubscriptionExisted = 0x11
    case continueAuthentication = 0x18
    case reAuthenticate = 0x19
    case unspecifiedError = 0x80
    case malformedPacket = 0x81
    case protocolError = 0x82
    case implementationSpecificError = 0x83
    case unsupportedProtocolVersion = 0x84
    case clientIdentifierNotValid = 0x85
    case badUserNameOrPassword = 0x86
    case notAuthorized = 0x87
    case serverUnavailable = 0x88
    case serverBusy = 0x89
    case banned = 0x8A
    case serverShuttingDown = 0x8B
    case badAuthenticationMethod = 0x8C
    case keepAliveTimeout = 0x8D
    case sessionTakenOver = 0x8E
    case topicFilterInvalid = 0x8F
    case topicNameInvalid = 0x90
    case packetIdentifierInUse = 0x91
    case packetIdentifierNotFound = 0x92
    case receiveMaximumExceeded = 0x93
    case topicAliasInvalid = 0x94
    case packetTooLarge = 0x95
    case messageRateTooHigh = 0x96
    case quotaExceeded = 0x97
    case administrativeAction = 0x98
    case payloadFormatInvalid = 0x99
    case retainNotSupported = 0x9A
    case qosNotSupported = 0x9B
    case useAnotherServer = 0x9C
    case serverMoved = 0x9D
    case sharedSubscriptionsNotSupported = 0x9E
    case connectionRateExceeded = 0x9F
    case maximumConnectTime = 0xA0
    case subscriptionIdentifiersNotSupported = 0xA1
    case wildcardSubscriptionsNotSupported = 0xA2

    public static let normalDisconnection = ReasonCode.success
    public static let grantedQoS0 = ReasonCode.success

    /// 0x80 and above report a failure (§2.4).
    public var isFailure: Bool { rawValue >= 0x80 }

    /// Whether §2.4's table lists this code for `type`.
    public func isAllowed(in type: PacketType) -> Bool {
        ReasonCode.allowed[type]?.contains(rawValue) ?? false
    }

    /// §2.4, Table 2‑6, read column by column.
    private static let allowed: [PacketType: Set<UInt8>] = {
        let ackFailures: Set<UInt8> = [0x80, 0x83, 0x87, 0x90, 0x91, 0x97, 0x99]
        return [
            .connack: [0x00, 0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8A, 0x8C, 0x90, 0x95, 0x97,
                       0x99, 0x9A, 0x9B, 0x9C, 0x9D, 0x9F],
            .puback: ackFailures.union([0x00, 0x10]),
            .pubrec: ackFailures.union([0x00, 0x10]),
            .pubrel: [0x00, 0x92],
            .pubcomp: [0x00, 0x92],
            .suback: [0x00, 0x01, 0x02, 0x80, 0x83, 0x87, 0x8F, 0x91, 0x97, 0x9E, 0xA1, 0xA2],
            .unsuback: [0x00, 0x11, 0x80, 0x83, 0x87, 0x8F, 0x91],
            .disconnect: [0x00, 0x04, 0x80, 0x81, 0x82, 0x83, 0x87, 0x89, 0x8B, 0x8C, 0x8D, 0x8E, 0x8F, 0x90, 0x93, 0x94,
                          0x95, 0x96, 0x97, 0x98, 0x99, 0x9A, 0x9B, 0x9C, 0x9D, 0x9E, 0x9F, 0xA0, 0xA1, 0xA2],
            .auth: [0x00, 0x18, 0x19],
        ]
    }()

    /// Reads a reason code byte for `type`, refusing one §2.4 does not list for it.
    static func decode(_ byte: UInt8, in type: PacketType) throws(MQTT5Error) -> ReasonCode {
        guard let code = ReasonCode(rawValue: byte), code.isAllowed(in: type) else {
            throw .invalidReasonCode(type, code: byte)
        }
        return code
    }
}
