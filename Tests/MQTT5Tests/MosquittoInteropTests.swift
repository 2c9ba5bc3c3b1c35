import Foundation
import IMAgentTestKit
import MQTT5
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The codec and the client session against a real broker: Debian's mosquitto
/// 2.x (installed by scripts/bootstrap), started per test on a Unix socket in a
/// temporary directory, ended in `defer`. A second connection plays the backend
/// of issue 14's contract: it reads `up`, answers on `down`.
@Suite struct MosquittoInteropTests {
    @Test(.timeLimit(.minutes(1)))
    func upAndDown_throughMosquitto_withTheSessionSurvivingAReconnect() async throws {
        let broker = try Mosquitto.start()
        defer { broker.stop() }
        let topics = try SessionTopics(prefix: "imagent", clientID: "host-1")
        let subscription = Subscribe.Subscription(topicFilter: topics.downFilter, maximumQoS: .atLeastOnce)
        var session = ClientSession(configuration: .init(
            clientIdentifier: "host-1", keepAlive: 30, sessionExpiryInterval: 300, receiveMaximum: 10,
            maximumPacketSize: 1 << 20, topicAliasMaximum: 0, subscriptions: [subscription]))

        // The backend: its own session, subscribed to every up topic of the host.
        let backend = try await BrokerConnection.open(broker.socketPath)
        defer { backend.close() }
        try await backend.send(.connect(Connect(clientIdentifier: "backend", cleanStart: true, keepAlive: 30)))
        guard case .connack(let backendAck) = try await backend.next(), backendAck.reasonCode == .success else {
            Issue.record("the backend was not accepted"); return
        }
        try await backend.send(.subscribe(Subscribe(packetIdentifier: 1, subscriptions: [
            .init(topicFilter: "imagent/host-1/+/+/up", maximumQoS: .atLeastOnce),
        ])))
        guard case .suback(let backendSub) = try await backend.next() else { Issue.record("no SUBACK"); return }
        #expect(backendSub.reasonCodes == [.grantedQoS1])

        // The host connects: Session Present 0, so it subscribes.
        var host = try await BrokerConnection.open(broker.socketPath)
        var actions = try await host.drive(&session, .connected, until: { if case .subscribed = $0 { true } else { false } })
        #expect(actions.contains { if case .ready(_, sessionPresent: false) = $0 { true } else { false } })
        #expect(actions.contains(.subscribed(filter: topics.downFilter, granted: .atLeastOnce)))

        // up: the host publishes with imagent-seq; the broker acknowledges; the backend receives it.
        let up = try topics.up(service: "echo", session: 7)
        guard case .send(let publish) = session.publish(topic: up, payload: ByteBuffer(string: "ping"), properties: [.user("imagent-seq", "1")], tag: 1) else {
            Issue.record("not sent"); return
        }
        actions = try await host.drive(&session, sending: publish, until: { $0 == .published(tag: 1) })
        guard case .publish(let atBackend) = try await backend.next() else { Issue.record("no PUBLISH at the backend"); return }
        #expect(atBackend.topic == up && atBackend.payload == ByteBuffer(string: "ping"))
        #expect(atBackend.properties.userProperties.map { "\($0.name)=\($0.value)" } == ["imagent-seq=1"])
        try await backend.send(.puback(PublishAck(packetIdentifier: atBackend.packetIdentifier)))

        // down while the host is offline: the broker keeps it for the session (Clean Start 0, Session Expiry 300).
        host.close()
        _ = session.handle(.connectionLost)
        let down = try topics.down(service: "echo", session: 7)
        try await backend.send(.publish(Publish(topic: down, qos: .atLeastOnce, packetIdentifier: 2,
                                                properties: [.user("imagent-seq", "1")], payload: ByteBuffer(string: "pong"))))
        guard case .puback(let downAck) = try await backend.next() else { Issue.record("no PUBACK for down"); return }
        #expect(downAck.reasonCode == .success)  // someone (the offline session) is subscribed

        host = try await BrokerConnection.open(broker.socketPath)
        defer { host.close() }
        actions = try await host.drive(&session, .connected, until: { if case .deliver = $0 { true } else { false } })
        #expect(actions.contains { if case .ready(_, sessionPresent: true) = $0 { true } else { false } })
        #expect(!actions.contains { if case .send(.subscribe) = $0 { true } else { false } }, "Session Present 1 keeps the subscription")
        guard case .deliver(let topic, let message, let receipt?) = actions.last else { Issue.record("\(actions)"); return }
        #expect(topic == down && message.payload == ByteBuffer(string: "pong"))
        #expect(topics.parseDown(topic).map { "\($0.service) \($0.session)" } == "echo 7")
        #expect(message.properties.userProperties.map { "\($0.name)=\($0.value)" } == ["imagent-seq=1"])
        // Stored: the PUBACK leaves, and the broker does not deliver it again on the next connection.
        for action in session.handle(.stored(receipt)) {
            if case .send(let packet) = action { try await host.send(packet) }
        }
        try await host.send(.pingreq)
        #expect(try await host.next() == .pingresp)
    }

    @Test(.timeLimit(.minutes(1)))
    func mosquittosConnack_decodes_andItsLimitsAreRead() async throws {
        let broker = try Mosquitto.start(extraConfiguration: "max_inflight_messages 5\nmax_packet_size 4096\n")
        defer { broker.stop() }
        let connection = try await BrokerConnection.open(broker.socketPath)
        defer { connection.close() }
        var session = ClientSession(configuration: .init(clientIdentifier: "limits"))
        let actions = try await connection.drive(&session, .connected, until: { if case .ready = $0 { true } else { false } })
        guard case .ready(let limits, _) = actions.last else { Issue.record("\(actions)"); return }
        #expect(limits.receiveMaximum == 5)
        #expect(limits.maximumPacketSize == 4096)
        // A message the broker can never take is refused before it is sent.
        let big = session.publish(topic: "t", payload: ByteBuffer(repeating: 0, count: 5000), tag: 1)
        #expect(big == .tooLarge(size: 5009, limit: 4096))  // 1 + 2 (Remaining Length) + 3 + 2 + 1 + 5000
    }
}

/// A mosquitto process on a Unix socket in its own temporary directory.
struct Mosquitto {
    let process: ChildProcess
    let directory: String
    var socketPath: String { directory + "/mqtt.sock" }

    static func start(extraConfiguration: String = "") throws -> Mosquitto {
        let executable = "/usr/sbin/mosquitto"
        guard access(executable, X_OK) == 0 else {
            throw TestFailure("\(executable) is missing: run scripts/bootstrap (it installs Debian's mosquitto)")
        }
        let directory = try makeTemporaryDirectory(prefix: "mosquitto-\(getpid())")
        let configuration = directory + "/mosquitto.conf"
        // mosquitto 2.x: port 0 with a path is a Unix-socket listener; `user root` keeps it from
        // switching to a user that could not create the socket in this directory.
        try writeFile(configuration, """
            listener 0 \(directory)/mqtt.sock
            allow_anonymous true
            persistence false
            user root
            log_dest file \(directory)/mosquitto.log
            \(extraConfiguration)
            """)
        let process = try ChildProcess(executable: executable, arguments: ["-c", configuration], stdout: .null, stderr: .null)
        let broker = Mosquitto(process: process, directory: directory)
        // Connect, not look for the file: bind creates it before listen, and a connection
        // in between is refused (CI saw it).
        for _ in 0..<500 where !unixSocketAccepts(broker.socketPath) {
            usleep(10_000)
        }
        guard unixSocketAccepts(broker.socketPath) else {
            broker.stop()
            throw TestFailure("mosquitto did not accept on \(broker.socketPath) within 5 s")
        }
        return broker
    }

    func stop() {
        process.terminate()
        for _ in 0..<300 where process.isRunning { usleep(10_000) }
        if process.isRunning {
            process.signal(SIGKILL)
            process.waitUntilExit()
        }
        removeTree(directory)
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// One MQTT connection through the real codec on a NIO channel.
final class BrokerConnection: Sendable {
    private final class Collector: ChannelInboundHandler, Sendable {
        typealias InboundIn = Packet
        let received = NIOLockedValueBox<[Packet]>([])
        let failure = NIOLockedValueBox<String?>(nil)

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let packet = unwrapInboundIn(data)
            received.withLockedValue { $0.append(packet) }
        }

        func errorCaught(context: ChannelHandlerContext, error: Error) {
            failure.withLockedValue { $0 = "\(error)" }
            context.close(promise: nil)
        }

        func channelInactive(context: ChannelHandlerContext) {
            failure.withLockedValue { $0 = $0 ?? "the broker closed the connection" }
        }
    }

    private let channel: Channel
    private let collector: Collector

    private init(channel: Channel, collector: Collector) {
        self.channel = channel
        self.collector = collector
    }

    /// Connects to the broker's Unix socket. A non-blocking connect there fails with EAGAIN while the broker's
    /// accept queue is full (CI saw it on a loaded machine right after start-up): tried again for up to 5 s.
    static func open(_ path: String) async throws -> BrokerConnection {
        let connection = try await poll(within: .seconds(5), every: .milliseconds(100)) { () async throws -> BrokerConnection? in
            do {
                return try await connect(path)
            } catch let error as IOError where error.errnoCode == EAGAIN {
                return nil
            }
        }
        // Still refused after 5 s: one more try reports the broker's own error.
        if let connection { return connection }
        return try await connect(path)
    }

    private static func connect(_ path: String) async throws -> BrokerConnection {
        let collector = Collector()
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandlers([
                        ByteToMessageHandler(MQTT5PacketDecoder()), MessageToByteHandler(MQTT5PacketEncoder()), collector,
                    ])
                }
            }
            .connect(unixDomainSocketPath: path)
            .get()
        return BrokerConnection(channel: channel, collector: collector)
    }

    func send(_ packet: Packet) async throws {
        try await channel.writeAndFlush(packet).get()
    }

    /// The next packet from the broker, within 5 s.
    func next() async throws -> Packet {
        for _ in 0..<500 {
            let packet = collector.received.withLockedValue { $0.isEmpty ? nil : $0.removeFirst() }
            if let packet { return packet }
            if let failure = collector.failure.withLockedValue({ $0 }) { throw TestFailure(failure) }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw TestFailure("no packet from the broker within 5 s")
    }

    /// Feeds `event` to the session, then every packet the broker sends, performing
    /// `.send` actions, until an action satisfies `done`; returns every action seen.
    func drive(_ session: inout ClientSession, _ event: ClientSession.Event, until done: (ClientSession.Action) -> Bool) async throws -> [ClientSession.Action] {
        var seen: [ClientSession.Action] = []
        var pending = session.handle(event)
        while true {
            for action in pending {
                seen.append(action)
                if case .send(let packet) = action { try await send(packet) }
                if case .close(_, let because) = action { throw TestFailure("the session closed: \(because)") }
            }
            if seen.contains(where: done) { return seen }
            pending = session.handle(.received(try await next()))
        }
    }

    func drive(_ session: inout ClientSession, sending packet: Packet, until done: (ClientSession.Action) -> Bool) async throws -> [ClientSession.Action] {
        try await send(packet)
        var seen: [ClientSession.Action] = []
        while !seen.contains(where: done) {
            for action in session.handle(.received(try await next())) {
                seen.append(action)
                if case .send(let packet) = action { try await send(packet) }
            }
        }
        return seen
    }

    func close() {
        channel.close(promise: nil)
    }
}
