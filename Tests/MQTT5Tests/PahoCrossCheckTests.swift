import Foundation
import IMAgentTestKit
import MQTT5
import NIOCore
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The codec against an independent encoder: Python paho-mqtt (installed by
/// scripts/bootstrap). `paho/encode_with_paho.py` runs a real paho client
/// against a listener on 127.0.0.1 and prints every packet it sent, plus two
/// packets built around property lists paho packed itself; each must decode
/// here and re-encode to the very same bytes.
@Suite struct PahoCrossCheckTests {
    static let packets: [(label: String, bytes: [UInt8])] = {
        let output = runPahoScript()
        return output.split(separator: "\n").compactMap { line in
            let parts = line.split(separator: " ")
            return parts.count == 2 ? (String(parts[0]), hexBytes(String(parts[1]))) : nil
        }
    }()

    @Test func pahoSentEveryClientPacketKind() {
        let kinds = Set(Self.packets.map { $0.label.split(separator: "-").last.map(String.init) ?? "" })
        #expect(kinds.isSuperset(of: [
            "connect", "subscribe", "puback", "pubrec", "pubcomp", "publish", "pubrel", "unsubscribe", "pingreq",
            "disconnect", "connack",
        ]), "paho gave: \(Self.packets.map(\.label))")
    }

    @Test func everyPahoPacket_decodes_andReencodesToTheSameBytes() throws {
        try #require(Self.packets.count >= 14, "paho gave: \(Self.packets.map(\.label))")
        for (label, bytes) in Self.packets {
            var buffer = ByteBuffer(bytes: bytes)
            let packet = try #require(try PacketParser.parse(&buffer), "\(label) is incomplete")
            #expect(buffer.readableBytes == 0, "\(label)")
            #expect(Array(try packet.encoded().readableBytesView) == bytes, "\(label): \(packet)")
        }
    }

    @Test func pahosConnect_carriesWhatTheScriptSet() throws {
        guard case .connect(let connect) = try decoded("connect") else { Issue.record("no CONNECT"); return }
        #expect(connect.clientIdentifier == "paho-1")
        #expect(!connect.cleanStart)
        #expect(connect.keepAlive == 30)
        #expect(connect.userName == "user")
        #expect(connect.password == ByteBuffer(string: "secret"))
        #expect(connect.properties.integer(.sessionExpiryInterval) == 86400)
        #expect(connect.properties.integer(.receiveMaximum) == 20)
        let will = try #require(connect.will)
        #expect(will.topic == "w/t" && will.qos == .atLeastOnce && will.retain)
        #expect(will.properties.integer(.willDelayInterval) == 5)
    }

    @Test func pahosPublish_carriesTheImagentSeqUserProperty() throws {
        let publishes = Self.packets.filter { $0.label.hasSuffix("-publish") }.compactMap { entry -> Publish? in
            var buffer = ByteBuffer(bytes: entry.bytes)
            if case .publish(let publish) = try? PacketParser.parse(&buffer) { return publish }
            return nil
        }
        let up = try #require(publishes.first { $0.topic == "imagent/c1/echo/7/up" })
        #expect(up.qos == .atLeastOnce)
        #expect(up.properties.userProperties.map { "\($0.name)=\($0.value)" } == ["imagent-seq=42"])
        #expect(up.payload == ByteBuffer(string: "ping"))
    }

    /// paho orders properties by identifier, the vector keeps a broker's order:
    /// the same set of properties either way.
    @Test func pahosConnackProperties_matchTheConnackLimitsVector() throws {
        guard case .connack(let fromPaho) = try decoded("connack") else { Issue.record("no CONNACK"); return }
        let vector = MQTT5Vectors.shared.valid.first { $0.name == "connack_limits" }!
        var buffer = ByteBuffer(bytes: vector.bytes)
        guard case .connack(let fromVector) = try PacketParser.parse(&buffer) else { Issue.record("vector"); return }
        #expect(Set(fromPaho.properties.entries) == Set(fromVector.properties.entries))
        #expect(fromPaho.properties.entries.count == fromVector.properties.entries.count)
    }

    private func decoded(_ kind: String) throws -> Packet? {
        let entry = try #require(Self.packets.first { $0.label.hasSuffix("-" + kind) }, "paho gave no \(kind)")
        var buffer = ByteBuffer(bytes: entry.bytes)
        return try PacketParser.parse(&buffer)
    }
}

/// Runs the script (at most 60 s), its output collected.
private func runPahoScript() -> String {
    let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    let script = directory.appendingPathComponent("paho/encode_with_paho.py").path
    let output = FileManager.default.temporaryDirectory.appendingPathComponent("paho-\(getpid()).out").path
    defer { unlink(output) }
    do {
        let process = try ChildProcess(executable: "/usr/bin/timeout", arguments: ["60", "/usr/bin/env", "python3", script],
                                       stdout: .file(output))
        process.waitUntilExit()
        if process.terminationReason != .exit || process.terminationStatus != 0 {
            Issue.record("\(script) ended with \(process.terminationStatus) (is paho-mqtt installed? scripts/bootstrap installs it)")
        }
    } catch {
        Issue.record("cannot start python3: \(error)")
        return ""
    }
    return readFile(output) ?? ""
}
