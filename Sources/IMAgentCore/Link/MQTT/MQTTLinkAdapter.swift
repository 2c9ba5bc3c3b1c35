import IMLink
import MQTT5
import NIOCore

/// IMLink/1 ↔ MQTT 5 on one connection, as a pure value: the engine and the
/// sessions keep speaking IMLink frames (the state machine, heartbeat,
/// reconnect and session router are the same for both protocols), and this
/// adapter turns them into MQTT packets and back (imagent-mqtt(7)):
///
/// - HELLO is answered at once (nothing to negotiate); LOGIN becomes CONNECT
///   (Clean Start 0, the token as Password), CONNACK becomes LOGIN_OK or the
///   failure class of its reason code, and SUBSCRIBE follows whenever the
///   broker holds no session;
/// - OPEN is answered at once: LAST_ACKED is the highest seq the broker has
///   PUBACKed on this engine's links (0 after a restart: the outbox is sent
///   again, and the backend drops what it had by `imagent-seq`), WINDOW is
///   the broker's Receive Maximum, but no less than 1,024;
/// - DATA becomes a QoS 1 PUBLISH on the session's `up` topic with
///   `imagent-seq`; its PUBACK becomes ACK. Beyond the broker's Receive
///   Maximum, PUBLISHes wait here in order (at most the sessions' windows).
///   A PUBACK that refuses the message fails its session as OPEN_FAIL
///   FORBIDDEN from an IMLink server does (`refusal`), unless its code is
///   about the link;
/// - a PUBLISH on a `down` topic becomes DATA with its `imagent-seq`; its
///   PUBACK leaves only once the sessions ACK that seq, that is once it is
///   stored (a duplicate is ACKed again at once). The sessions' WINDOW
///   bounds it, and a full inbox refuses it (`MQTTDownFlow`);
/// - PING becomes PINGREQ, PINGRESP becomes PONG; DISCONNECT becomes GOAWAY
///   (with its Server Reference as REDIRECT) or ERROR, by its reason code.
struct MQTTLinkAdapter {
    enum Output: Hashable, Sendable {
        /// Write this packet to the broker.
        case packet(Packet)
        /// Hand this frame to the engine as if the server had sent it.
        case frame(Frame)
        /// Close the connection for this reason (the engine backs off).
        case fail(String)
        /// Worth a line in the log (debug).
        case note(String)
        /// A message the adapter had to drop, with what identifies it (bounded in size): written
        /// to the log within the limit on lines that outside input triggers (`OutsideLog`).
        case warning(OutsideLogKind, [String: String])

        var endsLink: Bool {
            switch self {
            case .fail, .frame(.goaway), .frame(.loginFail): true
            case .frame(.error(let error)): error.session == 0
            case .packet, .frame, .note, .warning: false
            }
        }
    }

    static let seqProperty = "imagent-seq"
    /// OPEN_OK's WINDOW at least: messages a session may have unacknowledged, beyond the broker's
    /// Receive Maximum held here in order (the sessions' own byte limit still bounds them).
    static let minimumSessionWindow = 1_024
    /// How long the link waits before sending again a message that found no subscriber: 2 s,
    /// doubling with each such link in a row up to 64 s, so a backend that is away for a day costs
    /// a reconnect a minute, not one every 2 s.
    static func noSubscriberRetryMS(streak: Int) -> UInt32 {
        2_000 << UInt32(min(max(streak, 0), 5))
    }

    let settings: MQTTLinkSettings
    let topics: SessionTopics
    /// CONNECT's keep-alive (seconds).
    let keepAlive: UInt16
    /// The largest packet we accept, announced in CONNECT.
    let maximumPacketSize: UInt32
    /// The endpoint's port, for a Server Reference without one.
    let port: UInt16

    /// The highest seq the broker took, per session, across this engine's links.
    private(set) var lastAcked: [UInt64: UInt64]
    /// Links in a row that ended on a message nobody subscribed to (the next retry waits longer).
    private(set) var noSubscriberStreak: Int
    /// The broker's limits once CONNACK accepted us.
    private(set) var limits: BrokerLimits?

    /// Changed in place (`client!.…`), never copied out and written back: a copy
    /// would share its in-flight table with this one, so the first change would
    /// copy the whole table, once per packet.
    private var client: ClientSession?
    /// Open sessions and their service.
    private var services: [UInt64: String] = [:]
    /// The `up` topic of each open session, built once at OPEN rather than for every message.
    private var upTopics: [UInt64: String] = [:]
    private var nextTag: UInt64 = 1
    /// PUBLISHes the broker has not acknowledged, by tag.
    private var outbound: [UInt64: (session: UInt64, seq: UInt64)] = [:]
    /// PUBLISHes beyond the broker's Receive Maximum, oldest first.
    private var waiting: [(tag: UInt64, topic: String, payload: ByteBuffer, properties: Properties)] = []
    private var waitingHead = 0
    /// The `down` messages of the open sessions: their order, credit and PUBACKs.
    private var down = MQTTDownFlow()
    /// PINGs sent as PINGREQ, answered in order.
    private var pings: [Ping] = []
    /// The connection is being given up: no PUBACK counts any more (a later ACK would cover the failed message).
    private var failed = false

    init(settings: MQTTLinkSettings, topics: SessionTopics, keepAlive: UInt16, maxFrame: UInt32, port: UInt16,
         lastAcked: [UInt64: UInt64], noSubscriberStreak: Int = 0) {
        self.noSubscriberStreak = noSubscriberStreak
        self.settings = settings
        self.topics = topics
        self.keepAlive = keepAlive
        self.maximumPacketSize = settings.maximumPacketSize(maxFrame: maxFrame)
        self.port = port
        self.lastAcked = lastAcked
    }

    /// Whether CONNACK accepted us and the link has not failed (a DISCONNECT is due when closing).
    var isConnected: Bool { client?.isConnected ?? false }

    /// Whether the `down` messages held here (ahead of their turn, or beyond their session's credit)
    /// reach our Receive Maximum: the caller stops reading from the broker until they drop below it,
    /// so that a broker that sends more than it may cannot grow our memory.
    var holdsEnough: Bool { down.heldCount >= Int(settings.receiveMaximum) }

    /// `down` messages refused at a full inbox on this connection.
    var refusedAtFullInbox: Int { down.refusedCount }

    /// The largest DATA body the broker's Maximum Packet Size lets through on every `up` topic.
    var maxBody: UInt32? {
        limits.map { UInt32(clamping: max(0, $0.maximumPacketSize - settings.publishOverhead)) }
    }

    // MARK: Frames from the engine and the sessions

    mutating func send(_ frame: Frame) -> [Output] {
        ending(sending(frame))
    }

    /// Packets from the broker.
    mutating func received(_ packet: Packet) -> [Output] {
        ending(receiving(packet))
    }

    /// A PUBLISH above our Maximum Packet Size, which the decoder read past (a broker that ignores
    /// the limit [MQTT-3.1.2-24] would send it again on every new connection if the link only
    /// closed): acknowledged with 0x83 (Implementation specific error) so that the broker drops
    /// it, and logged with its session and seq. That seq stays a gap for the session until the
    /// backend sends it again within the limit; the link and the other sessions go on.
    mutating func receivedOversized(_ head: OversizedPublish) -> [Output] {
        ending(refusing(head))
    }

    /// Once an output ends the link, no later PUBACK may turn into an ACK.
    private mutating func ending(_ outputs: [Output]) -> [Output] {
        if outputs.contains(where: \.endsLink) { failed = true }
        return outputs
    }

    private mutating func sending(_ frame: Frame) -> [Output] {
        switch frame {
        case .hello(let hello):
            // Nothing to negotiate: no DEFLATE (MQTT payloads go as they are), FLOW for Receive Maximum.
            return [.frame(.helloOK(HelloOK(features: [.flow], maxFrame: hello.maxFrame)))]
        case .login(let login):
            return connect(password: settings.passwordFromToken ? login.token : nil)
        case .ping(let ping):
            guard isConnected else { return [] }
            // One PINGREQ at a time is what the heartbeat sends; a few more are kept in case.
            if pings.count >= 8 { pings.removeFirst() }
            pings.append(ping)
            return [.packet(.pingreq)]
        case .open(let open):
            return opened(open)
        case .close(let close):
            services[close.session] = nil
            upTopics[close.session] = nil
            lastAcked[close.session] = nil
            return perform(down.close(close.session))
        case .data(let data):
            return publish(data)
        case .ack(let ack):
            return perform(down.acknowledged(ack.session, through: ack.seq))
        case .window(let update):
            return perform(down.window(update.session, update.window))
        case .error(let error) where error.session == 0:
            // The engine closes after a fatal ERROR: say why in DISCONNECT.
            guard isConnected else { return [] }
            client = nil
            let reason: ReasonCode = error.code == .frameTooLarge ? .packetTooLarge : .protocolError
            return [.packet(.disconnect(Disconnect(reasonCode: reason)))]
        case .error, .pong:
            // A session ERROR (UNKNOWN_SESSION) has no MQTT counterpart.
            return []
        case .helloOK, .loginOK, .loginFail, .goaway, .openOK, .openFail:
            return [.note("\(frame.type) is sent by servers only; not sent to the broker")]
        }
    }

    /// DISCONNECT (normal) when the agent closes an established connection.
    mutating func closing() -> [Output] {
        guard isConnected else { return [] }
        client = nil
        return [.packet(.disconnect(Disconnect(reasonCode: .normalDisconnection)))]
    }

    private mutating func connect(password: ByteBuffer?) -> [Output] {
        var session = ClientSession(configuration: .init(
            clientIdentifier: settings.clientID, keepAlive: keepAlive,
            sessionExpiryInterval: settings.sessionExpirySeconds, receiveMaximum: settings.receiveMaximum,
            maximumPacketSize: maximumPacketSize,
            subscriptions: [.init(topicFilter: topics.downFilter, maximumQoS: .atLeastOnce)],
            userName: settings.username, password: password))
        let actions = session.handle(.connected)
        client = session
        return actions.flatMap { perform($0) }
    }

    private mutating func opened(_ open: Open) -> [Output] {
        do {
            upTopics[open.session] = try topics.up(service: open.service, session: open.session)
        } catch {
            return [.frame(.openFail(OpenFail(session: open.session, code: .forbidden, message: "\(error)")))]
        }
        services[open.session] = open.service
        let steps = down.open(open.session, resumeAfter: open.resumeAfter, window: open.window)
        // Sessions may write past the broker's Receive Maximum: the excess waits here and leaves in the
        // same turn as the PUBACK that frees its place, so a small Receive Maximum (mosquitto's 20)
        // costs one broker round trip per that many messages and not also a turn through the sessions.
        let window = UInt32(max(min(limits?.receiveMaximum ?? 0, Int(UInt16.max)), Self.minimumSessionWindow))
        return perform(steps) + [.frame(.openOK(OpenOK(session: open.session, lastAcked: lastAcked[open.session] ?? 0, window: window)))]
    }

    private mutating func publish(_ data: DataFrame) -> [Output] {
        guard let topic = upTopics[data.session], client?.isConnected == true else { return [] }
        let tag = nextTag
        nextTag += 1
        outbound[tag] = (data.session, data.seq)
        let properties: Properties = [.user(Self.seqProperty, String(data.seq))]
        // Held messages go first: a new one never overtakes them.
        guard waitingHead == waiting.count else {
            waiting.append((tag, topic, data.body, properties))
            return []
        }
        let result = client!.publish(topic: topic, payload: data.body, properties: properties, tag: tag)
        switch result {
        case .send(let packet):
            return [.packet(packet)]
        case .wouldBlock:
            waiting.append((tag, topic, data.body, properties))
            return []
        case .tooLarge(let size, let limit):
            return [.fail("session \(data.session) seq \(data.seq): PUBLISH of \(size) bytes exceeds the broker's Maximum Packet Size of \(limit)")]
        case .qosNotSupported:
            return [.frame(.error(ErrorFrame(code: .forbidden, message: "the broker's Maximum QoS is 0; imagent needs QoS 1")))]
        case .notConnected:
            return []
        }
    }

    /// Sends held PUBLISHes while the broker's Receive Maximum allows.
    private mutating func sendWaiting() -> [Output] {
        guard client != nil else { return [] }
        var outputs: [Output] = []
        while waitingHead < waiting.count {
            let next = waiting[waitingHead]
            let result = client!.publish(topic: next.topic, payload: next.payload, properties: next.properties, tag: next.tag)
            if case .wouldBlock = result { break }
            waitingHead += 1
            if case .send(let packet) = result { outputs.append(.packet(packet)) }
        }
        if waitingHead == waiting.count {
            waiting.removeAll(keepingCapacity: waiting.count < 4_096)
            waitingHead = 0
        }
        return outputs
    }

    // MARK: Packets from the broker

    private mutating func receiving(_ packet: Packet) -> [Output] {
        guard client != nil else {
            return [.fail("the broker sent \(packet.type) before CONNECT")]
        }
        let actions = client!.handle(.received(packet))
        return actions.flatMap { perform($0) }
    }

    private mutating func refusing(_ head: OversizedPublish) -> [Output] {
        guard client != nil else { return [.fail("the broker sent PUBLISH before CONNECT")] }
        let publish = head.publish
        var details = ["topic": LogText.bounded(publish.topic), "size": "\(head.size)", "limit": "\(maximumPacketSize)"]
        if let (_, session) = topics.parseDown(publish.topic) { details["session"] = "\(session)" }
        if let seq = publish.properties.userProperties.first(where: { $0.name == Self.seqProperty }) {
            details["seq"] = LogText.bounded(seq.value)
        }
        let reason = "PUBLISH of \(head.size) bytes exceeds the Maximum Packet Size of \(maximumPacketSize) in CONNECT"
        return [.warning(.oversizedPublish, details)]
            + client!.refuse(publish, reasonCode: .implementationSpecificError, reason: reason).flatMap { perform($0) }
    }

    private mutating func perform(_ action: ClientSession.Action) -> [Output] {
        switch action {
        case .send(let packet):
            return [.packet(packet)]
        case .ready(let limits, let sessionPresent):
            self.limits = limits
            // The heartbeat stays within the keep-alive in force (the broker's Server Keep Alive when it set one).
            let keepAlive = limits.serverKeepAlive ?? self.keepAlive
            return [.note("CONNACK: session present \(sessionPresent), receive maximum \(limits.receiveMaximum), maximum packet size \(limits.maximumPacketSize), keep-alive \(keepAlive) s"),
                    .frame(.loginOK(LoginOK(heartbeatMS: keepAlive == 0 ? nil : UInt32(keepAlive) * 1000)))]
        case .deliver(let topic, let publish, let receipt):
            return deliver(topic: topic, publish, receipt: receipt)
        case .published(let tag):
            guard let (session, seq) = outbound.removeValue(forKey: tag), !failed else { return sendWaiting() }
            var outputs: [Output] = []
            // PUBACKs come in the order of the PUBLISHes [MQTT-4.6.0-2], so seq only grows per session.
            noSubscriberStreak = 0
            if services[session] != nil, seq > lastAcked[session] ?? 0 {
                lastAcked[session] = seq
                outputs.append(.frame(.ack(Ack(session: session, seq: seq))))
            }
            return outputs + sendWaiting()
        case .publishedWithoutSubscribers(let tag):
            // Taken but dropped: nobody subscribes the up topic (the backend is away, or the broker
            // lost its subscription in a restart). Not acknowledged: the link is dropped and the
            // message goes again after a pause, and everything behind it.
            guard !failed else { return [] }
            failed = true
            defer { noSubscriberStreak += 1 }
            let message = outbound.removeValue(forKey: tag).map { "session \($0.session) seq \($0.seq)" } ?? "a message"
            return [.frame(.goaway(Goaway(code: .overloaded, message: "PUBACK for \(message): no matching subscribers; sending it again later",
                                          retryAfterMS: Self.noSubscriberRetryMS(streak: noSubscriberStreak))))]
        case .publishRefused(let tag, let code):
            return refused(tag: tag, code)
        case .receiveMaximumExceeded(let unacknowledged):
            return [.warning(.receiveMaximumExceeded, ["unacknowledged": "\(unacknowledged)", "receive_maximum": "\(settings.receiveMaximum)"])]
        case .subscribed(let filter, _):
            return [.note("subscribed to \(filter)")]
        case .subscriptionRefused(let filter, let code):
            return [.frame(.error(ErrorFrame(code: .forbidden, message: "the broker refused the subscription to \(filter): \(code)")))]
        case .pong:
            guard !pings.isEmpty else { return [] }
            return [.frame(.pong(pings.removeFirst()))]
        case .refused(let code, _) where code == .badUserNameOrPassword || code == .notAuthorized:
            // mosquitto and ejabberd answer a wrong or rotated password with 0x87, not 0x86: both are a
            // token to read again, never a reason to stop (imagent-mqtt(7), FAILURES).
            // Short enough for STATUS's last_error (160 characters) with what to check first.
            let who = settings.username.map { "user \"\($0)\"" } ?? "client id \"\(settings.clientID)\" (no user name)"
            return [.frame(.loginFail(LoginFail(code: .tokenInvalid, message: "CONNACK 0x\(String(code.rawValue, radix: 16)) \(code): "
                + "check that the [auth] token is the broker's password for \(who); it is read again at each retry")))]
        case .refused(let code, let reference):
            return [Self.failure(code, serverReference: reference, port: port, what: "CONNACK", connecting: true)]
        case .disconnected(let code, let reference):
            failed = true
            return [Self.failure(code, serverReference: reference, port: port, what: "DISCONNECT", connecting: false)]
        case .close(let code, let because):
            failed = true
            self.client = nil
            return [.packet(.disconnect(Disconnect(reasonCode: code))), .fail("MQTT protocol error by the broker: \(because)")]
        }
    }

    private mutating func deliver(topic: String, _ publish: Publish, receipt: ClientSession.Receipt?) -> [Output] {
        let seq = publish.properties.userProperties.first { $0.name == Self.seqProperty }.flatMap { UInt64($0.value) }
        guard let (service, session) = topics.parseDown(topic), let seq, seq > 0, services[session] == service, down.isOpen(session) else {
            // Nobody can take it: acknowledged so that the broker stops sending it, and logged.
            let warning: Output = .warning(.publishForNoSession, [
                "topic": LogText.bounded(topic),
                "reason": seq == nil ? "no decimal imagent-seq" : "no open session of that service",
            ])
            return [warning] + (receipt.map { perform([.acknowledge($0)]) } ?? [])
        }
        return perform(down.received(session, seq: seq, payload: publish.payload, receipt: receipt))
    }

    /// What `down` decided, as packets to the broker and frames to the sessions.
    private mutating func perform(_ steps: [MQTTDownFlow.Step]) -> [Output] {
        var outputs: [Output] = []
        for step in steps {
            switch step {
            case .forward(let data):
                outputs.append(.frame(.data(data)))
            case .acknowledge(let receipt):
                guard client != nil else { continue }
                outputs += client!.handle(.stored(receipt)).compactMap { if case .send(let packet) = $0 { .packet(packet) } else { nil } }
            case .refuse(let receipt, let session, let seq, let because):
                outputs.append(.warning(.inboxFull, ["session": "\(session)", "seq": "\(seq)", "reason": because,
                                                     "refused_on_link": "\(down.refusedCount)"]))
                guard client != nil else { continue }
                outputs += client!.handle(.declined(receipt, .quotaExceeded, reason: "session \(session) refuses seq \(seq): \(because)"))
                    .compactMap { if case .send(let packet) = $0 { .packet(packet) } else { nil } }
            case .drop(let session, let seq, let because):
                outputs.append(.warning(.publishOutOfTurn, ["session": "\(session)", "seq": "\(seq)", "reason": because]))
            }
        }
        return outputs
    }

    /// A PUBACK that refused an `up` message. A code about the message or its topic fails its
    /// session alone, as OPEN_FAIL FORBIDDEN from an IMLink server does: its client hears
    /// UPSTREAM_REJECTED, the link and the other sessions go on, and nothing more of it is published
    /// on this link (it would be refused again). A code about the broker's state (0x97 Quota exceeded)
    /// or the link's (0x91 Packet Identifier in use) ends the link as before, and the message goes
    /// again on the next one.
    private mutating func refused(tag: UInt64, _ code: ReasonCode) -> [Output] {
        guard let (session, seq) = outbound.removeValue(forKey: tag) else { return [] }
        let what = "PUBACK for session \(session) seq \(seq)"
        guard Self.failsTheSession(code) else {
            guard !failed else { return [] }
            failed = true
            return [Self.failure(code, serverReference: nil, port: port, what: what, connecting: false)]
        }
        guard !failed, services.removeValue(forKey: session) != nil else { return [] }
        upTopics[session] = nil
        // Its messages that wait for the broker's Receive Maximum are not published; those on the wire
        // are answered without an ACK (`services` no longer has the session).
        let kept = waiting[waitingHead...].filter { outbound[$0.tag]?.session != session }
        for item in waiting[waitingHead...] where outbound[item.tag]?.session == session { outbound[item.tag] = nil }
        waiting = Array(kept)
        waitingHead = 0
        let message = "the broker refused seq \(seq) on the session's up topic: \(code) (0x\(String(code.rawValue, radix: 16)))"
        return [.frame(.openFail(OpenFail(session: session, code: .forbidden, message: message)))] + sendWaiting()
    }

    /// PUBACK codes that say the broker will not take this message or topic (§3.4.2.1).
    static func failsTheSession(_ code: ReasonCode) -> Bool {
        switch code {
        case .unspecifiedError, .implementationSpecificError, .notAuthorized, .topicNameInvalid, .payloadFormatInvalid: true
        default: false
        }
    }

    /// What a failing reason code means for the link, as the frame an IMLink server would have sent.
    static func failure(_ code: ReasonCode, serverReference: String?, port: UInt16, what: String, connecting: Bool) -> Output {
        let message = "\(what): \(code) (0x\(String(code.rawValue, radix: 16)))"
        let redirect = serverReference.flatMap { redirectEndpoint($0, port: port) }
        switch code {
        case .useAnotherServer, .serverMoved, .serverShuttingDown, .success:
            return .frame(.goaway(Goaway(code: .shutdown, message: message, redirect: redirect)))
        case .serverBusy, .serverUnavailable, .quotaExceeded, .connectionRateExceeded, .messageRateTooHigh:
            return .frame(.goaway(Goaway(code: .overloaded, message: message, redirect: redirect)))
        case .badUserNameOrPassword, .notAuthorized:
            // At CONNECT handled before (a token to read again); on an established link the broker
            // revoked the login or refused a topic: both may be mended on the broker, so back off.
            return connecting ? .frame(.loginFail(LoginFail(code: .tokenInvalid, message: message)))
                : .frame(.error(ErrorFrame(code: .tokenInvalid, message: message)))
        case .banned, .clientIdentifierNotValid, .badAuthenticationMethod:
            // Never succeeds again as configured: the link stops until an operator acts.
            return connecting ? .frame(.loginFail(LoginFail(code: .forbidden, message: message)))
                : .frame(.error(ErrorFrame(code: .forbidden, message: message)))
        case .topicNameInvalid where !connecting:
            return .frame(.error(ErrorFrame(code: .forbidden, message: message)))
        case .unsupportedProtocolVersion:
            return .frame(.error(ErrorFrame(code: .versionUnsupported, message: message)))
        default:
            return .frame(.error(ErrorFrame(code: .protocolError, message: message)))
        }
    }

    /// The first `host:port` of a Server Reference (§4.11: space-separated, the port optional).
    static func redirectEndpoint(_ reference: String, port: UInt16) -> String? {
        guard let first = reference.split(separator: " ").first.map(String.init), !first.isEmpty else { return nil }
        if endpointProblem(first) == nil { return first }
        let withPort = first.contains(":") && !first.hasPrefix("[") ? "[\(first)]:\(port)" : "\(first):\(port)"
        return endpointProblem(withPort) == nil ? withPort : first
    }
}
