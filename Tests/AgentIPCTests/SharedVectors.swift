import AgentIPC
import FoundationEssentials
import NIOCore
import Testing

/// The shared byte-exact vectors, `<package root>/../shared/vectors/ipc.json`,
/// read where they live so the tests follow every change to them.
struct SharedVectors: Decodable {
    struct Valid: Decodable, Sendable, CustomTestStringConvertible {
        var name: String
        var hex: String
        var op: String
        var request: UInt32
        var fields: [String: FieldValue]

        var testDescription: String { name }
    }

    struct Invalid: Decodable, Sendable, CustomTestStringConvertible {
        var name: String
        var hex: String
        var error: String

        var testDescription: String { name }
    }

    var valid: [Valid]
    var invalid: [Invalid]

    static let url = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent() // AgentIPCTests
        .deletingLastPathComponent() // Tests
        .deletingLastPathComponent() // package root
        .appendingPathComponent("../shared/vectors/ipc.json")

    static func load() throws -> SharedVectors {
        try JSONDecoder().decode(SharedVectors.self, from: Data(contentsOf: url))
    }
}

/// A field value as the vectors write it: a number, or a string (text, or hex
/// for PAYLOAD).
enum FieldValue: Decodable, Hashable, Sendable, CustomStringConvertible {
    case number(UInt64)
    case text(String)

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let number = try? container.decode(UInt64.self) {
            self = .number(number)
        } else {
            self = .text(try container.decode(String.self))
        }
    }

    var description: String {
        switch self {
        case .number(let number): "\(number)"
        case .text(let text): "\"\(text)\""
        }
    }
}

extension FieldValue {
    init(_ integer: some FixedWidthInteger) { self = .number(UInt64(integer)) }
    init(hexOf bytes: ByteBuffer) { self = .text(bytes.hexString) }
}

extension IPCMessage {
    /// The decoded values by the specification's record names, written the way
    /// the vectors write them, so a decoded frame can be compared with its
    /// vector's `fields`. Absent optionals are left out; so are extensions,
    /// which no vector has.
    var specFields: [String: FieldValue] {
        var fields: [String: FieldValue] = [:]
        func set(_ tag: IPCTag, _ value: FieldValue?) {
            if let value { fields[tag.description] = value }
        }
        switch self {
        case .hello(let m):
            set(.ipcVersion, FieldValue(m.ipcVersion))
            set(.clientName, m.clientName.map(FieldValue.text))
        case .open(let m):
            set(.session, m.session.map(FieldValue.init))
            set(.service, m.service.map(FieldValue.text))
            set(.priority, m.priority.map { FieldValue($0.rawValue) })
            set(.durable, m.durable.map { FieldValue($0 ? 1 : 0) })
        case .close(let m), .detach(let m):
            set(.session, FieldValue(m.session))
        case .send(let m):
            set(.session, FieldValue(m.session))
            set(.payload, FieldValue(hexOf: m.payload))
            set(.ttlMS, m.ttlMS.map(FieldValue.init))
        case .ack(let m), .accepted(let m), .acked(let m):
            set(.session, FieldValue(m.session))
            set(.seq, FieldValue(m.seq))
        case .status, .sessions, .metrics, .watch, .events, .connect, .disconnect, .reconnect, .reload, .ping, .ok, .pong:
            break
        case .welcome(let m):
            set(.ipcVersion, FieldValue(m.ipcVersion))
            set(.daemonVersion, .text(m.daemonVersion))
            set(.maxPayload, FieldValue(m.maxPayload))
            set(.linkState, FieldValue(m.linkState.rawValue))
        case .opened(let m):
            set(.session, FieldValue(m.session))
            set(.sessionState, FieldValue(m.sessionState.rawValue))
            set(.sentSeq, FieldValue(m.sentSeq))
            set(.ackedSeq, FieldValue(m.ackedSeq))
            set(.deliveredSeq, FieldValue(m.deliveredSeq))
        case .result(let m), .event(let m):
            set(.json, .text(m.json))
        case .error(let m):
            set(.code, FieldValue(m.code.rawValue))
            set(.message, m.message.map(FieldValue.text))
        case .message(let m):
            set(.session, FieldValue(m.session))
            set(.seq, FieldValue(m.seq))
            set(.payload, FieldValue(hexOf: m.payload))
        case .expired(let m):
            set(.session, FieldValue(m.session))
            set(.seq, FieldValue(m.seq))
            set(.code, FieldValue(m.code.rawValue))
            set(.message, m.message.map(FieldValue.text))
        case .sessionState(let m):
            set(.session, FieldValue(m.session))
            set(.sessionState, FieldValue(m.state.rawValue))
            set(.code, m.code.map { FieldValue($0.rawValue) })
            set(.message, m.message.map(FieldValue.text))
        case .linkState(let m):
            set(.linkState, FieldValue(m.state.rawValue))
        }
        return fields
    }
}

extension ByteBuffer {
    /// Lower-case hex of the readable bytes, as the vectors write frames and payloads.
    var hexString: String {
        let digits = Array("0123456789abcdef")
        var hex = ""
        for byte in readableBytesView {
            hex.append(digits[Int(byte >> 4)])
            hex.append(digits[Int(byte & 0xF)])
        }
        return hex
    }

    /// A buffer holding the bytes `hex` spells; nil if it is not hex.
    init?(hex: String) {
        guard hex.count.isMultiple(of: 2) else { return nil }
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index != hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            guard let byte = UInt8(hex[index..<next], radix: 16) else { return nil }
            bytes.append(byte)
            index = next
        }
        self.init(bytes: bytes)
    }
}
