import NIOCore

/// The client side of one MQTT 5 session, as a pure value: it turns events
/// (a connection made or lost, a packet received, an inbound message stored)
/// into actions (packets to send, messages to store, outcomes to report).
/// The I/O layer owns the socket, the clock and the durable store.
///
/// It keeps, bounded by what the two sides announced:
/// - Packet Identifiers for PUBLISH QoS 1 and SUBSCRIBE (§2.2.1), never one in use;
/// - the outbound QoS 1 messages not yet acknowledged, at most the broker's
///   Receive Maximum of them on the wire (§4.9); beyond that `publish` answers
///   `.wouldBlock` and the caller keeps the message in its own queue;
/// - the broker's Maximum Packet Size: a message that can never fit is refused
///   at once (`.tooLarge`), never sent;
/// - topic aliases both ways, per connection (§3.3.2.3.4);
/// - the subscriptions, sent again whenever CONNACK says Session Present 0, or
///   when the previous SUBSCRIBE was never acknowledged.
///
/// The codec is the same both ways, so rules that bind only the server are left
/// to this layer; it does not refuse a server's DISCONNECT that carries a Session
/// Expiry Interval [MQTT-3.14.2-2], it reports it.
///
/// Decisions where the standard leaves room: outbound messages are QoS 1 only
/// (the contract), so a PUBLISH of QoS 2 from the broker is a protocol
/// error; Session Present 1 is always accepted, because the daemon's session
/// state (its outbox) is durable; a full outbound alias table sends the topic
/// in full rather than evicting an alias.
public struct ClientSession: Sendable {
    public struct Configuration: Hashable, Sendable {
        public var clientIdentifier: String
        public var keepAlive: UInt16
        public var sessionExpiryInterval: UInt32
        /// QoS 1 messages the broker may have unacknowledged towards us.
        public var receiveMaximum: UInt16
        /// The largest packet we accept; announced in CONNECT.
        public var maximumPacketSize: UInt32
        /// Topic aliases we accept from the broker (0: none).
        public var topicAliasMaximum: UInt16
        public var subscriptions: [Subscribe.Subscription]
        public var userName: String?
        public var password: ByteBuffer?

        public init(clientIdentifier: String, keepAlive: UInt16 = 60, sessionExpiryInterval: UInt32 = 86_400,
                    receiveMaximum: UInt16 = 100, maximumPacketSize: UInt32 = 1 << 20, topicAliasMaximum: UInt16 = 0,
                    subscriptions: [Subscribe.Subscription] = [], userName: String? = nil, password: ByteBuffer? = nil) {
            precondition(receiveMaximum > 0 && maximumPacketSize > 0, "MQTT 5 forbids 0 for Receive Maximum and Maximum Packet Size")
            self.clientIdentifier = clientIdentifier
            self.keepAlive = keepAlive
            self.sessionExpiryInterval = sessionExpiryInterval
            self.receiveMaximum = receiveMaximum
            self.maximumPacketSize = maximumPacketSize
            self.topicAliasMaximum = topicAliasMaximum
            self.subscriptions = subscriptions
            self.userName = userName
            self.password = password
        }
    }

    /// An inbound QoS 1 message to acknowledge once it is stored; only valid on the connection it came on.
    public struct Receipt: Hashable, Sendable {
        public let connection: UInt64
        public let packetIdentifier: UInt16
    }

    public enum Event: Hashable, Sendable {
        /// The transport is up; CONNECT goes out.
        case connected
        case received(Packet)
        /// The message of `receipt` is durable: its PUBACK may leave.
        case stored(Receipt)
        /// The message of `receipt` will not be kept: its PUBACK leaves with this failure code
        /// (PUBACK's, §3.4.2.1) and `reason` as the Reason String, so that the broker drops it.
        case declined(Receipt, ReasonCode, reason: String)
        case connectionLost
    }

    public enum Action: Hashable, Sendable {
        case send(Packet)
        /// CONNACK accepted the session.
        case ready(BrokerLimits, sessionPresent: Bool)
        /// An inbound message, its topic resolved; store it, then report `.stored(receipt)` (QoS 1; nil for QoS 0).
        case deliver(topic: String, Publish, receipt: Receipt?)
        /// The broker took the message tagged `tag` (PUBACK 0x00).
        case published(tag: UInt64)
        /// The broker took the message tagged `tag` but nobody subscribes its topic (PUBACK 0x10):
        /// the broker has dropped it. A caller that needs a receiver sends it again later.
        case publishedWithoutSubscribers(tag: UInt64)
        /// The broker refused the message, or it can no longer fit the broker's limits.
        case publishRefused(tag: UInt64, ReasonCode)
        case subscribed(filter: String, granted: QoS)
        case subscriptionRefused(filter: String, ReasonCode)
        case pong
        /// CONNACK refused the connection (§3.2.2.2); Server Reference when the broker names another.
        case refused(ReasonCode, serverReference: String?)
        /// The broker sent DISCONNECT (§3.14).
        case disconnected(ReasonCode, serverReference: String?)
        /// The broker broke a rule: send DISCONNECT with this code and close (§4.13).
        case close(ReasonCode, because: String)
        /// The broker has more QoS 1 messages unacknowledged towards us than our Receive Maximum
        /// [MQTT-3.3.4-9]; once per connection. They are taken all the same (see `publishReceived`).
        case receiveMaximumExceeded(unacknowledged: Int)
    }

    public enum PublishResult: Hashable, Sendable {
        case send(Packet)
        /// Receive Maximum messages are unacknowledged: try again after the next `.published`.
        case wouldBlock
        /// Larger than the broker's Maximum Packet Size: it can never be sent.
        case tooLarge(size: Int, limit: Int)
        /// The broker's Maximum QoS is 0 [MQTT-3.2.2-11]: no message can be sent at QoS 1 on this connection.
        case qosNotSupported
        case notConnected
    }

    private enum Phase: Sendable {
        case disconnected, connecting, connected(BrokerLimits)
    }

    public let configuration: Configuration
    private var phase = Phase.disconnected
    private var connection: UInt64 = 0
    private var nextPacketIdentifier: UInt16 = 1
    private var inFlight = InFlightQueue<Publish>()
    private var pendingSubscribe: UInt16?
    private var subscriptionsConfirmed = false
    private var inboundUnacknowledged = Set<UInt16>()
    /// Whether `.receiveMaximumExceeded` was reported on this connection.
    private var reportedOverflow = false
    private var outboundAliases: [String: UInt16] = [:]
    private var inboundAliases: [UInt16: String] = [:]

    public init(configuration: Configuration) {
        self.configuration = configuration
    }

    /// The keep-alive in force: the broker's Server Keep Alive when it sent one (§3.2.2.3.14).
    public var keepAlive: UInt16 {
        if case .connected(let limits) = phase, let server = limits.serverKeepAlive { return server }
        return configuration.keepAlive
    }

    public var isConnected: Bool {
        if case .connected = phase { true } else { false }
    }

    /// Outbound messages not yet acknowledged (sent or waiting for a slot after a reconnect).
    public var unacknowledgedCount: Int { inFlight.count }

    public mutating func handle(_ event: Event) -> [Action] {
        switch event {
        case .connected:
            connection &+= 1
            phase = .connecting
            return [.send(.connect(connectPacket()))]
        case .connectionLost:
            phase = .disconnected
            inFlight.markAllWaiting()
            if pendingSubscribe != nil { subscriptionsConfirmed = false }
            pendingSubscribe = nil
            inboundUnacknowledged.removeAll()
            reportedOverflow = false
            outboundAliases.removeAll()
            inboundAliases.removeAll()
            return []
        case .stored(let receipt):
            guard receipt.connection == connection, isConnected,
                  inboundUnacknowledged.remove(receipt.packetIdentifier) != nil
            else { return [] }  // that connection is gone: the broker sends the message again
            return [.send(.puback(PublishAck(packetIdentifier: receipt.packetIdentifier)))]
        case .declined(let receipt, let code, let reason):
            guard receipt.connection == connection, case .connected(let limits) = phase,
                  inboundUnacknowledged.remove(receipt.packetIdentifier) != nil
            else { return [] }
            return [.send(.puback(Self.failureAck(receipt.packetIdentifier, code, reason: reason, limits: limits)))]
        case .received(let packet):
            return received(packet)
        }
    }

    /// Offers one QoS 1 message tagged `tag` (the caller's id for it, e.g. its
    /// outbox row); on `.send` the session holds it until PUBACK.
    public mutating func publish(topic: String, payload: ByteBuffer, properties: Properties = [], tag: UInt64) -> PublishResult {
        guard case .connected(let limits) = phase else { return .notConnected }
        var publish = Publish(topic: topic, qos: .atLeastOnce, packetIdentifier: 1, properties: properties, payload: payload)
        if let size = Self.oversize(publish, limits: limits) { return .tooLarge(size: size, limit: limits.maximumPacketSize) }
        guard limits.maximumQoS >= .atLeastOnce else { return .qosNotSupported }
        // Held messages fill every free slot (sendWaiting) and go first: a new one never overtakes them.
        guard !inFlight.hasWaiting, inFlight.sentCount < limits.receiveMaximum, inFlight.count < Self.messageIdentifiers
        else { return .wouldBlock }
        publish.packetIdentifier = allocatePacketIdentifier()
        inFlight.appendSent(.init(tag: tag, packetIdentifier: publish.packetIdentifier, message: publish))
        return .send(.publish(aliased(publish, limits: limits)))
    }

    /// An inbound PUBLISH this side will not take (one above our Maximum Packet Size, read past):
    /// acknowledged at once with `reasonCode` (PUBACK's failure codes, §3.4.2.1) so that the broker
    /// drops it and sends what follows. `reason` goes as the Reason String while the PUBACK stays
    /// within the broker's Maximum Packet Size [MQTT-3.4.2-2].
    public mutating func refuse(_ publish: Publish, reasonCode: ReasonCode, reason: String) -> [Action] {
        guard case .connected(let limits) = phase else { return [] }
        switch publish.qos {
        case .atMostOnce:
            return []
        case .atLeastOnce:
            guard !inboundUnacknowledged.contains(publish.packetIdentifier) else {
                return [.close(.protocolError, because: "PUBLISH with packet identifier \(publish.packetIdentifier), which is still unacknowledged")]
            }
            return [.send(.puback(Self.failureAck(publish.packetIdentifier, reasonCode, reason: reason, limits: limits)))]
        case .exactlyOnce:
            return [.close(.protocolError, because: "QoS 2 PUBLISH on a session that subscribes at QoS 1 at most")]
        }
    }

    // MARK: Received packets

    private mutating func received(_ packet: Packet) -> [Action] {
        switch (phase, packet) {
        case (.connecting, .connack(let connack)):
            return connackReceived(connack)
        case (.connected, .connack), (.disconnected, _), (.connecting, _):
            return [.close(.protocolError, because: "\(packet.type) before or after CONNACK")]
        case (.connected(let limits), .publish(let publish)):
            return publishReceived(publish, limits: limits)
        case (.connected(let limits), .puback(let ack)):
            return pubackReceived(ack, limits: limits)
        case (.connected, .suback(let ack)):
            return subackReceived(ack)
        case (.connected, .unsuback):
            return []
        case (.connected, .pingresp):
            return [.pong]
        case (.connected, .disconnect(let disconnect)):
            return [.disconnected(disconnect.reasonCode, serverReference: disconnect.properties.string(.serverReference))]
        case (.connected, .auth):
            return [.close(.protocolError, because: "AUTH, but CONNECT asked for no enhanced authentication (§4.12)")]
        case (.connected, .connect), (.connected, .subscribe), (.connected, .unsubscribe), (.connected, .pingreq),
             (.connected, .pubrec), (.connected, .pubrel), (.connected, .pubcomp):
            return [.close(.protocolError, because: "\(packet.type) is not expected from a broker by a QoS 1 client")]
        }
    }

    private mutating func connackReceived(_ connack: ConnAck) -> [Action] {
        guard !connack.reasonCode.isFailure else {
            phase = .disconnected
            return [.refused(connack.reasonCode, serverReference: connack.properties.string(.serverReference))]
        }
        let limits = BrokerLimits(connack)
        phase = .connected(limits)
        var actions: [Action] = [.ready(limits, sessionPresent: connack.sessionPresent)]
        if !connack.sessionPresent || !subscriptionsConfirmed, !configuration.subscriptions.isEmpty {
            subscriptionsConfirmed = false
            let identifier = allocatePacketIdentifier()
            pendingSubscribe = identifier
            actions.append(.send(.subscribe(Subscribe(packetIdentifier: identifier, subscriptions: configuration.subscriptions))))
        }
        // Unacknowledged messages go again: with DUP and their identifiers when the broker kept the session
        // (§4.4), as new messages when it did not; within the new limits either way.
        inFlight.updateAll { entry in
            if Self.oversize(entry.message, limits: limits) != nil {
                actions.append(.publishRefused(tag: entry.tag, .packetTooLarge))
                return false
            } else if limits.maximumQoS < .atLeastOnce {
                actions.append(.publishRefused(tag: entry.tag, .qosNotSupported))
                return false
            }
            entry.message.dup = connack.sessionPresent
            return true
        }
        actions += sendWaiting(limits: limits)
        return actions
    }

    private mutating func publishReceived(_ publish: Publish, limits: BrokerLimits) -> [Action] {
        var publish = publish
        if let alias = publish.properties.integer(.topicAlias) {
            guard alias <= configuration.topicAliasMaximum else {
                return [.close(.topicAliasInvalid, because: "topic alias \(alias) above our maximum \(configuration.topicAliasMaximum)")]
            }
            if publish.topic.isEmpty {
                guard let topic = inboundAliases[UInt16(alias)] else {
                    return [.close(.protocolError, because: "topic alias \(alias) was never given a topic [§3.3.2.3.4]")]
                }
                publish.topic = topic
            } else {
                inboundAliases[UInt16(alias)] = publish.topic
            }
        }
        switch publish.qos {
        case .atMostOnce:
            return [.deliver(topic: publish.topic, publish, receipt: nil)]
        case .atLeastOnce:
            // A broker that sends more than our Receive Maximum breaks [MQTT-3.3.4-9] (mosquitto 2.0 does,
            // with messages it queued while we were away, after a reconnect). Closing would not help: it
            // sends them again on the next connection, and the link would never get past them. They are
            // taken: Packet Identifiers bound them to 65,535, and the caller stops reading while it holds
            // too many (TCP pushes back on the broker).
            inboundUnacknowledged.insert(publish.packetIdentifier)
            var actions: [Action] = []
            if inboundUnacknowledged.count > Int(configuration.receiveMaximum), !reportedOverflow {
                reportedOverflow = true
                actions.append(.receiveMaximumExceeded(unacknowledged: inboundUnacknowledged.count))
            }
            let receipt = Receipt(connection: connection, packetIdentifier: publish.packetIdentifier)
            return actions + [.deliver(topic: publish.topic, publish, receipt: receipt)]
        case .exactlyOnce:
            return [.close(.protocolError, because: "QoS 2 PUBLISH on a session that subscribes at QoS 1 at most")]
        }
    }

    private mutating func pubackReceived(_ ack: PublishAck, limits: BrokerLimits) -> [Action] {
        guard let done = inFlight.removeSent(packetIdentifier: ack.packetIdentifier) else {
            return [.close(.protocolError, because: "PUBACK for packet identifier \(ack.packetIdentifier), which is not in flight")]
        }
        var actions: [Action] = ack.reasonCode.isFailure ? [.publishRefused(tag: done.tag, ack.reasonCode)]
            : ack.reasonCode == .noMatchingSubscribers ? [.publishedWithoutSubscribers(tag: done.tag)]
            : [.published(tag: done.tag)]
        actions += sendWaiting(limits: limits)
        return actions
    }

    private mutating func subackReceived(_ ack: SubscriptionAck) -> [Action] {
        guard ack.packetIdentifier == pendingSubscribe else {
            return [.close(.protocolError, because: "SUBACK for packet identifier \(ack.packetIdentifier), which is not pending")]
        }
        pendingSubscribe = nil
        subscriptionsConfirmed = true
        // SUBACK's only codes below 0x80 are Granted QoS 0, 1 and 2 (§3.9.3), whose values are the QoS.
        return zip(configuration.subscriptions, ack.reasonCodes).map { subscription, code in
            if !code.isFailure, let granted = QoS(rawValue: code.rawValue) {
                .subscribed(filter: subscription.topicFilter, granted: granted)
            } else {
                .subscriptionRefused(filter: subscription.topicFilter, code)
            }
        }
    }

    // MARK: Helpers

    /// A PUBACK with a failure code, with `reason` as its Reason String while it stays within the
    /// broker's Maximum Packet Size [MQTT-3.4.2-2].
    private static func failureAck(_ identifier: UInt16, _ code: ReasonCode, reason: String, limits: BrokerLimits) -> PublishAck {
        var ack = PublishAck(packetIdentifier: identifier, reasonCode: code, properties: [Property(.reasonString, .string(reason))])
        if (try? Packet.puback(ack).encoded().readableBytes) ?? Int.max > limits.maximumPacketSize { ack.properties = [] }
        return ack
    }

    /// Packet Identifiers held by messages at most: of the 65,535, one stays free for a SUBSCRIBE
    /// (a broker may allow 65,535 in flight, and after a reconnect all of them wait for its SUBACK).
    static let messageIdentifiers = Int(UInt16.max) - 1

    /// Sends held messages, oldest first, while the broker's Receive Maximum allows.
    private mutating func sendWaiting(limits: BrokerLimits) -> [Action] {
        var actions: [Action] = []
        while inFlight.sentCount < limits.receiveMaximum, let entry = inFlight.sendNextWaiting() {
            actions.append(.send(.publish(aliased(entry.message, limits: limits))))
        }
        return actions
    }

    /// The packet's size if it is above the broker's Maximum Packet Size, else nil.
    /// The size is that of the form without a topic alias, which `aliased` falls back to.
    private static func oversize(_ publish: Publish, limits: BrokerLimits) -> Int? {
        let size = publish.encodedSize
        return size > limits.maximumPacketSize ? size : nil
    }

    /// The publish as it goes on this connection: the topic replaced by its alias when one is set, or
    /// a new alias set while the broker's Topic Alias Maximum leaves room. A Topic Alias property
    /// adds 3 bytes, so an aliased form that would pass the Maximum Packet Size is not used.
    private mutating func aliased(_ publish: Publish, limits: BrokerLimits) -> Publish {
        guard limits.topicAliasMaximum > 0 else { return publish }
        var aliased = publish
        let known = outboundAliases[publish.topic]
        guard let alias = known ?? (outboundAliases.count < limits.topicAliasMaximum ? UInt16(outboundAliases.count + 1) : nil)
        else { return publish }
        aliased.properties.set(Property(.topicAlias, integer: UInt32(alias)))
        if known != nil { aliased.topic = "" }
        guard aliased.encodedSize <= limits.maximumPacketSize else { return publish }
        outboundAliases[publish.topic] = alias
        return aliased
    }

    private mutating func allocatePacketIdentifier() -> UInt16 {
        while inFlight.contains(packetIdentifier: nextPacketIdentifier) || pendingSubscribe == nextPacketIdentifier {
            nextPacketIdentifier = nextPacketIdentifier == .max ? 1 : nextPacketIdentifier + 1
        }
        let identifier = nextPacketIdentifier
        nextPacketIdentifier = nextPacketIdentifier == .max ? 1 : nextPacketIdentifier + 1
        return identifier
    }

    private func connectPacket() -> Connect {
        var properties: Properties = [
            Property(.sessionExpiryInterval, integer: configuration.sessionExpiryInterval),
            Property(.receiveMaximum, integer: UInt32(configuration.receiveMaximum)),
            Property(.maximumPacketSize, integer: configuration.maximumPacketSize),
        ]
        if configuration.topicAliasMaximum > 0 {
            properties.entries.append(Property(.topicAliasMaximum, integer: UInt32(configuration.topicAliasMaximum)))
        }
        return Connect(clientIdentifier: configuration.clientIdentifier, cleanStart: false, keepAlive: configuration.keepAlive,
                       properties: properties, userName: configuration.userName, password: configuration.password)
    }
}
