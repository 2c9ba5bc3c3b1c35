import AgentIPC
import IMLink
import NIOCore
import Testing

/// Every message type survives encode → decode unchanged, optionals and
/// unknown records included, and lays its records out as the specification
/// orders them.
@Suite struct RoundTripTests {
    static let unknownRecord = TLVRecord(tag: 0x7ABC, value: ByteBuffer(bytes: [0xDE, 0xAD]))

    /// A message of `op` with every optional record present and one unknown record.
    static func fullMessage(_ op: IPCOp) -> IPCMessage {
        let ext = [unknownRecord]
        let payload = ByteBuffer(bytes: [0x00, 0xFF, 0x10])
        return switch op {
        case .hello: .hello(.init(ipcVersion: 1, clientName: "démo", extensions: ext))
        case .open: .open(.init(session: 5, service: "chat", priority: .low, durable: false, extensions: ext))
        case .close: .close(.init(session: 5, extensions: ext))
        case .detach: .detach(.init(session: 5, extensions: ext))
        case .send: .send(.init(session: 5, payload: payload, ttlMS: 1_000, extensions: ext))
        case .ack: .ack(.init(session: 5, seq: 12, extensions: ext))
        case .status: .status(.init(extensions: ext))
        case .sessions: .sessions(.init(extensions: ext))
        case .metrics: .metrics(.init(extensions: ext))
        case .watch: .watch(.init(extensions: ext))
        case .events: .events(.init(extensions: ext))
        case .connect: .connect(.init(extensions: ext))
        case .disconnect: .disconnect(.init(extensions: ext))
        case .reconnect: .reconnect(.init(extensions: ext))
        case .reload: .reload(.init(extensions: ext))
        case .ping: .ping(.init(extensions: ext))
        case .ok: .ok(.init(extensions: ext))
        case .welcome: .welcome(.init(daemonVersion: "0.1.0", maxPayload: 1 << 20, linkState: .connecting, extensions: ext))
        case .opened: .opened(.init(session: 5, sessionState: .paused, sentSeq: 3, ackedSeq: 2, deliveredSeq: 1, extensions: ext))
        case .accepted: .accepted(.init(session: 5, seq: 4, extensions: ext))
        case .result: .result(.init(json: #"{"sessions":[]}"#, extensions: ext))
        case .pong: .pong(.init(extensions: ext))
        case .error: .error(.init(code: .queueFull, message: "outbox full", extensions: ext))
        case .message: .message(.init(session: 5, seq: 13, payload: payload, extensions: ext))
        case .acked: .acked(.init(session: 5, seq: 4, extensions: ext))
        case .expired: .expired(.init(session: 5, seq: 4, code: .expired, message: "TTL", extensions: ext))
        case .sessionState: .sessionState(.init(session: 5, state: .failed, code: .upstreamRejected, message: "no",
                                                extensions: ext))
        case .linkState: .linkState(.init(state: .disconnecting, extensions: ext))
        case .event: .event(.init(json: #"{"link":"up"}"#, extensions: ext))
        }
    }

    @Test(arguments: IPCOp.allCases)
    func everyOp_roundTripsWithAllOptionalAndUnknownRecords(_ op: IPCOp) throws {
        let frame = IPCFrame(request: op.direction == .event ? 0 : 0xCAFE, message: Self.fullMessage(op))
        #expect(frame.message.op == op)
        var encoded = frame.encoded()
        let decoded = try IPCFrameParser.parse(&encoded)
        #expect(decoded == frame)
        #expect(encoded.readableBytes == 0)
    }

    @Test(arguments: IPCOp.allCases)
    func everyOp_writesUnknownRecordsFirst_thenKnownOnesInSpecOrder(_ op: IPCOp) throws {
        var encoded = IPCFrame(request: 1, message: Self.fullMessage(op)).encoded()
        #expect(encoded.readInteger(as: UInt32.self) == UInt32(encoded.readableBytes))
        #expect(encoded.readInteger(as: UInt16.self) == op.rawValue)
        #expect(encoded.readInteger(as: UInt32.self) == 1)
        let tags = try encoded.tlvRecords().map(\.tag)
        #expect(tags == [Self.unknownRecord.tag] + op.recordTags.map(\.rawValue))
    }

    @Test func absentOptionalRecords_stayAbsent() throws {
        let frame = IPCFrame(request: 2, message: .open(.init(service: "chat")))
        var encoded = frame.encoded()
        #expect(encoded.readableBytes == 10 + 6 + 4, "header and SERVICE only")
        #expect(try IPCFrameParser.parse(&encoded) == frame)
    }

    @Test func openWithSessionZero_isKeptApartFromOpenWithoutSession() throws {
        let withZero = IPCFrame(request: 2, message: .open(.init(session: 0, service: "chat")))
        let without = IPCFrame(request: 2, message: .open(.init(service: "chat")))
        var encodedWithZero = withZero.encoded()
        var encodedWithout = without.encoded()
        #expect(try IPCFrameParser.parse(&encodedWithZero) == withZero)
        #expect(try IPCFrameParser.parse(&encodedWithout) == without)
        #expect(withZero != without)
    }

    @Test func opsSortIntoRequestsRepliesAndEvents() {
        #expect(IPCOp.allCases.filter { $0.direction == .request }.count == 16)
        #expect(IPCOp.allCases.filter { $0.direction == .reply }.count == 7)
        #expect(IPCOp.allCases.filter { $0.direction == .event }.count == 6)
        #expect(IPCOp.error.direction == .reply, "ERROR answers a request even though section 5 lists it")
    }

    /// A MESSAGE whose payload is left out (a gathering write) gives the same bytes as one
    /// encoded whole; smaller payloads and other messages are written whole.
    @Test func aMessageEncodedLeavingItsPayload_isTheSameBytesAsWhole() throws {
        for size in [0, 99, 100, 65_536] {
            let payload = ByteBuffer(repeating: 0xA5, count: size)
            let frame = IPCFrame(request: 0, message: .message(.init(session: 5, seq: 13, payload: payload, extensions: [Self.unknownRecord])))
            var head = ByteBuffer()
            let left = frame.encode(into: &head, leavingPayloadFrom: 100)
            #expect(left == (size >= 100 ? payload : nil), "\(size)")
            if let left { head.writeImmutableBuffer(left) }
            #expect(head == frame.encoded(), "\(size)")
            var parsed = head
            #expect(try IPCFrameParser.parse(&parsed) == frame)
        }
        let send = IPCFrame(request: 4, message: Self.fullMessage(.send))
        var buffer = ByteBuffer()
        #expect(send.encode(into: &buffer, leavingPayloadFrom: 0) == nil)
        #expect(buffer == send.encoded())
    }
}
