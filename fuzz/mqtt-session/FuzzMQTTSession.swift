import FuzzReplay
@testable import IMAgentCore
import IMLink
import MQTT5
import NIOCore

/// libFuzzer entry point: the daemon's MQTT upstream as a pure value
/// (`MQTTLinkAdapter` and the `ClientSession` inside it) between a scripted
/// engine and a broker whose bytes are the fuzzer's.
///
/// The input is a script of command bytes (`MQTTSessionScript`): most put
/// broker bytes on the wire, parsed as the link's decoder parses them; the
/// others are what the engine and the sessions do (OPEN, DATA, ACK, CLOSE,
/// PING, closing, the connection lost). Nothing here reads a clock: the
/// adapter has none, so the script's order is all the time there is.
///
/// Besides never crashing, the adapter must keep what the engine relies on:
/// every packet it writes encodes; an ACK to the engine names a seq of that
/// session that was sent as DATA, and never goes back; DATA to the engine is
/// for an open session and, past what was delivered, comes in order without
/// gaps.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMQTTSession(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    var script = MQTTSessionScript(FuzzInput(start, count))
    script.run()
    return 0
}

struct MQTTSessionScript {
    static let services = ["echo", "chat", "x"]
    static let topics = try! SessionTopics(prefix: "imagent", clientID: "agent")
    static let settings = MQTTLinkSettings(clientID: "agent", passwordFromToken: true)
    static let maxFrame: UInt32 = 1 << 16

    var input: FuzzInput
    var adapter: MQTTLinkAdapter
    /// Broker bytes not yet parsed into a packet.
    var wire = ByteBuffer()
    /// The engine's view, kept across connections as the link's memory is.
    var open: [UInt64: String] = [:]
    var nextSeq: [UInt64: UInt64] = [:]
    var ackedSeq: [UInt64: UInt64] = [:]
    var deliverNext: [UInt64: UInt64] = [:]
    var closed: Set<UInt64> = []
    /// LOGIN_OK came on this connection: the engine sends session frames only from then on.
    var loggedIn = false

    init(_ input: FuzzInput) {
        self.input = input
        adapter = Self.newAdapter(lastAcked: [:], streak: 0)
    }

    static func newAdapter(lastAcked: [UInt64: UInt64], streak: Int) -> MQTTLinkAdapter {
        MQTTLinkAdapter(settings: settings, topics: topics, keepAlive: 30, maxFrame: maxFrame, port: 1883,
                        lastAcked: lastAcked, noSubscriberStreak: streak)
    }

    mutating func run() {
        connect()
        while let command = input.byte() {
            let session = UInt64(command & 0x07) + 1
            if !loggedIn, (3...6).contains(command >> 5) { continue }
            switch command >> 5 {
            case 0, 1, 2:
                // Broker bytes: 0–30 of them, or a 16-bit count after 0x1F.
                let length = command & 0x1F == 0x1F ? Int(input.uint16() ?? 0) : Int(command & 0x1F)
                brokerBytes(input.chunk(length))
            case 3:
                // Session ids are never used again after CLOSE, and the engine opens a session once per link.
                guard open[session] == nil, !closed.contains(session) else { continue }
                let service = Self.services[Int(command >> 3 & 0x03) % Self.services.count]
                let resumeAfter = UInt64(input.byte() ?? 0)
                deliverNext[session] = resumeAfter + 1
                open[session] = service
                engine(.open(Open(session: session, service: service, resumeAfter: resumeAfter)))
            case 4:
                let seq = nextSeq[session, default: 1]
                nextSeq[session] = seq + 1
                let body = ByteBuffer(repeating: command, count: Int(input.byte() ?? 0) * 16)
                engine(.data(DataFrame(session: session, seq: seq, body: body)))
            case 5:
                engine(.ack(Ack(session: session, seq: UInt64(input.byte() ?? 0))))
            case 6:
                guard open[session] != nil else { continue }
                closed.insert(session)
                open[session] = nil
                deliverNext[session] = nil
                engine(.close(Close(session: session)))
            default:
                switch command & 0x07 {
                case 0: engine(.ping(Ping(id: UInt64(command), timestampUS: 0)))
                case 1: check(adapter.closing()); reconnect()
                case 2: reconnect()
                case 3: engine(.error(ErrorFrame(code: .protocolError, message: "fuzz"))); reconnect()
                case 4: engine(.error(ErrorFrame(session: session, code: .unknownSession)))
                default: engine(.window(WindowUpdate(session: session, window: 8)))
                }
            }
        }
    }

    /// HELLO and LOGIN, as the engine starts every connection.
    mutating func connect() {
        wire.clear()
        loggedIn = false
        engine(.hello(Hello(features: [.flow], agentID: "agent", maxFrame: Self.maxFrame)))
        engine(.login(Login(token: ByteBuffer(string: "token"), agentID: "agent")))
    }

    /// A new connection with the link's memory, as the engine makes one after a loss.
    mutating func reconnect() {
        adapter = Self.newAdapter(lastAcked: adapter.lastAcked, streak: adapter.noSubscriberStreak)
        connect()
    }

    /// LOGIN_OK: the engine opens its sessions again, each after what it has delivered.
    mutating func loggedInAgain() {
        loggedIn = true
        for (session, service) in open.sorted(by: { $0.key < $1.key }) {
            let resumeAfter = deliverNext[session, default: 1] - 1
            engine(.open(Open(session: session, service: service, resumeAfter: resumeAfter)))
        }
    }

    mutating func engine(_ frame: Frame) {
        let outputs = adapter.send(frame)
        check(outputs)
        if outputs.contains(where: \.endsLink) { reconnect() }
    }

    mutating func brokerBytes(_ bytes: ArraySlice<UInt8>) {
        wire.writeBytes(bytes)
        while true {
            let packet: Packet?
            do {
                packet = try PacketParser.parse(&wire, maxPacketSize: Int(adapter.maximumPacketSize))
            } catch {
                // The link's decoder closes the connection on a malformed packet.
                return reconnect()
            }
            guard let packet else { return }
            let outputs = adapter.received(packet)
            check(outputs)
            if outputs.contains(where: \.endsLink) { return reconnect() }
            if outputs.contains(where: { if case .frame(.loginOK) = $0 { true } else { false } }) { loggedInAgain() }
        }
    }

    /// What the adapter hands out keeps the engine's and the broker's rules.
    mutating func check(_ outputs: [MQTTLinkAdapter.Output]) {
        for output in outputs {
            switch output {
            case .packet(let packet):
                do {
                    _ = try packet.encoded()
                } catch {
                    preconditionFailure("the adapter wrote a packet that does not encode: \(error); \(packet)")
                }
            case .frame(.ack(let ack)):
                precondition(open[ack.session] != nil, "ACK for session \(ack.session), which is not open")
                precondition(ack.seq < nextSeq[ack.session, default: 1], "ACK of seq \(ack.seq) of session \(ack.session), never sent")
                precondition(ack.seq > ackedSeq[ack.session, default: 0], "ACK of seq \(ack.seq) of session \(ack.session) goes back")
                ackedSeq[ack.session] = ack.seq
            case .frame(.data(let data)):
                precondition(open[data.session] != nil, "DATA for session \(data.session), which is not open")
                let next = deliverNext[data.session, default: 1]
                precondition(data.seq <= next, "DATA seq \(data.seq) of session \(data.session) before \(next)")
                if data.seq == next { deliverNext[data.session] = next + 1 }
            case .fail(let reason):
                precondition(!reason.isEmpty)
            default:
                break
            }
        }
    }
}

#if !FUZZING
@main
struct ReplayMQTTSessionInputs {
    static func main() { replayInputs(tool: "fuzz-mqtt-session", through: fuzzMQTTSession) }
}
#endif
