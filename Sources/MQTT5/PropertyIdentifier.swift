/// Every property the standard defines (§2.2.2.2, Table 2‑4), with its data
/// type, the packets it may appear in, and whether it may repeat.
public enum PropertyIdentifier: UInt8, Hashable, Sendable, CaseIterable {
    case payloadFormatIndicator = 0x01
    case messageExpiryInterval = 0x02
    case contentType = 0x03
    case responseTopic = 0x08
    case correlationData = 0x09
    case subscriptionIdentifier = 0x0B
    case sessionExpiryInterval = 0x11
    case assignedClientIdentifier = 0x12
    case serverKeepAlive = 0x13
    case authenticationMethod = 0x15
    case authenticationData = 0x16
    case requestProblemInformation = 0x17
    case willDelayInterval = 0x18
    case requestResponseInformation = 0x19
    case responseInformation = 0x1A
    case serverReference = 0x1C
    case reasonString = 0x1F
    case receiveMaximum = 0x21
    case topicAliasMaximum = 0x22
    case topicAlias = 0x23
    case maximumQoS = 0x24
    case retainAvailable = 0x25
    case userProperty = 0x26
    case maximumPacketSize = 0x27
    case wildcardSubscriptionAvailable = 0x28
    case subscriptionIdentifierAvailable = 0x29
    case sharedSubscriptionAvailable = 0x2A

    public enum DataType: Hashable, Sendable {
        case byte, twoByteInteger, fourByteInteger, variableByteInteger, string, binary, stringPair
    }

    public var dataType: DataType {
        switch self {
        case .payloadFormatIndicator, .requestProblemInformation, .requestResponseInformation, .maximumQoS,
             .retainAvailable, .wildcardSubscriptionAvailable, .subscriptionIdentifierAvailable,
             .sharedSubscriptionAvailable:
            .byte
        case .serverKeepAlive, .receiveMaximum, .topicAliasMaximum, .topicAlias:
            .twoByteInteger
        case .messageExpiryInterval, .sessionExpiryInterval, .willDelayInterval, .maximumPacketSize:
            .fourByteInteger
        case .subscriptionIdentifier:
            .variableByteInteger
        case .contentType, .responseTopic, .assignedClientIdentifier, .authenticationMethod, .responseInformation,
             .serverReference, .reasonString:
            .string
        case .correlationData, .authenticationData:
            .binary
        case .userProperty:
            .stringPair
        }
    }

    /// Whether Table 2‑4 lists the property for `context`.
    public func isAllowed(in context: PropertyContext) -> Bool {
        switch self {
        case .payloadFormatIndicator, .messageExpiryInterval, .contentType, .responseTopic, .correlationData:
            context == .publish || context == .will
        case .subscriptionIdentifier:
            context == .publish || context == .subscribe
        case .sessionExpiryInterval:
            context == .connect || context == .connack || context == .disconnect
        case .assignedClientIdentifier, .serverKeepAlive, .responseInformation, .maximumQoS, .retainAvailable,
             .wildcardSubscriptionAvailable, .subscriptionIdentifierAvailable, .sharedSubscriptionAvailable:
            context == .connack
        case .authenticationMethod, .authenticationData:
            context == .connect || context == .connack || context == .auth
        case .requestProblemInformation, .requestResponseInformation:
            context == .connect
        case .willDelayInterval:
            context == .will
        case .serverReference:
            context == .connack || context == .disconnect
        case .reasonString:
            switch context {
            case .connack, .puback, .pubrec, .pubrel, .pubcomp, .suback, .unsuback, .disconnect, .auth: true
            case .connect, .will, .publish, .subscribe, .unsubscribe: false
            }
        case .receiveMaximum, .topicAliasMaximum, .maximumPacketSize:
            context == .connect || context == .connack
        case .topicAlias:
            context == .publish
        case .userProperty:
            true
        }
    }

    /// User Property may always repeat (§3.1.2.11.8 and siblings); Subscription
    /// Identifier may repeat in PUBLISH only (§3.3.2.3.8, §3.8.2.1.2). Every
    /// other property is "a Protocol Error to include … more than once".
    public func mayRepeat(in context: PropertyContext) -> Bool {
        self == .userProperty || (self == .subscriptionIdentifier && context == .publish)
    }

    /// The values the standard forbids for integer properties.
    ///
    /// Payload Format Indicator is defined only for 0 and 1 (§3.3.2.3.2); other
    /// values are refused too, a decision where the text is silent.
    func isValid(_ value: UInt32) -> Bool {
        switch self {
        case .payloadFormatIndicator, .requestProblemInformation, .requestResponseInformation, .maximumQoS,
             .retainAvailable, .wildcardSubscriptionAvailable, .subscriptionIdentifierAvailable,
             .sharedSubscriptionAvailable:
            value <= 1
        case .receiveMaximum, .topicAlias, .maximumPacketSize:
            value != 0
        case .subscriptionIdentifier:
            (1...VariableByteInteger.max).contains(value)
        case .messageExpiryInterval, .sessionExpiryInterval, .serverKeepAlive, .willDelayInterval, .topicAliasMaximum:
            true
        case .contentType, .responseTopic, .correlationData, .assignedClientIdentifier, .authenticationMethod,
             .authenticationData, .responseInformation, .serverReference, .reasonString, .userProperty:
            true  // not integers; never asked
        }
    }
}

/// Where a property list sits: a packet's properties, or the Will Properties of CONNECT.
public enum PropertyContext: Hashable, Sendable, CustomStringConvertible {
    case connect, will, connack, publish, puback, pubrec, pubrel, pubcomp, subscribe, suback, unsubscribe, unsuback,
         disconnect, auth

    public var description: String {
        self == .will ? "Will Properties" : "\(packetType)"
    }

    var packetType: PacketType {
        switch self {
        case .connect, .will: .connect
        case .connack: .connack
        case .publish: .publish
        case .puback: .puback
        case .pubrec: .pubrec
        case .pubrel: .pubrel
        case .pubcomp: .pubcomp
        case .subscribe: .subscribe
        case .suback: .suback
        case .unsubscribe: .unsubscribe
        case .unsuback: .unsuback
        case .disconnect: .disconnect
        case .auth: .auth
        }
    }
}
