/// What the broker allows on this connection, read from CONNACK (§3.2.2.3),
/// with the standard's value for each property the broker left out.
public struct BrokerLimits: Hashable, Sendable {
    /// PUBLISH packets of QoS 1 and 2 the client may have unacknowledged (§3.2.2.3.3; absent: 65,535).
    public var receiveMaximum: Int = 65_535
    /// The largest packet the broker accepts (§3.2.2.3.6; absent: no limit but the standard's).
    public var maximumPacketSize: Int = Packet.largestSize
    /// §3.2.2.3.4; absent: QoS 2.
    public var maximumQoS: QoS = .exactlyOnce
    /// Topic aliases the broker accepts from the client (§3.2.2.3.8; absent: 0, none).
    public var topicAliasMaximum: Int = 0
    public var retainAvailable = true
    /// §3.2.2.3.13; absent: available.
    public var sharedSubscriptionAvailable = true
    /// The keep-alive the client must use instead of its own (§3.2.2.3.14).
    public var serverKeepAlive: UInt16?
    public var assignedClientIdentifier: String?
    /// The broker's choice when it differs from CONNECT's (§3.2.2.3.2).
    public var sessionExpiryInterval: UInt32?

    public init() {}

    public init(_ connack: ConnAck) {
        let properties = connack.properties
        if let value = properties.integer(.receiveMaximum) { receiveMaximum = Int(value) }
        if let value = properties.integer(.maximumPacketSize) { maximumPacketSize = min(Int(value), Packet.largestSize) }
        if let value = properties.integer(.maximumQoS) { maximumQoS = QoS(rawValue: UInt8(value)) ?? .atLeastOnce }
        if let value = properties.integer(.topicAliasMaximum) { topicAliasMaximum = Int(value) }
        if let value = properties.integer(.retainAvailable) { retainAvailable = value == 1 }
        if let value = properties.integer(.sharedSubscriptionAvailable) { sharedSubscriptionAvailable = value == 1 }
        serverKeepAlive = properties.integer(.serverKeepAlive).map { UInt16($0) }
        assignedClientIdentifier = properties.string(.assignedClientIdentifier)
        sessionExpiryInterval = properties.integer(.sessionExpiryInterval)
    }
}
