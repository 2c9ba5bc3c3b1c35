import Glibc
import IMAgentTestKit
import Testing

@testable import IMAgentCore

/// The default AGENT_ID (imagentd.toml(5), `agent_id`): the machine id hashed for imagent as
/// sd_id128_get_machine_app_specific(3) does, never /etc/machine-id itself, which machine-id(5)
/// asks applications not to send off the host. The same id is the MQTT client id and topic level.
@Suite(.timeLimit(.minutes(1)),
       .enabled(if: access("/etc/machine-id", R_OK) == 0, "needs /etc/machine-id"))
struct MachineAgentIDTests {
    private var rawMachineID: String {
        get throws {
            let output = try #require(try? readWhole("/etc/machine-id"))
            return String(output.prefix { $0 != "\n" })
        }
    }

    private func readWhole(_ path: String) throws -> String {
        let file = try #require(fopen(path, "r"))
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 256)
        while true {
            let count = fread(&buffer, 1, buffer.count, file)
            if count == 0 { break }
            bytes += buffer[0..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// HMAC-SHA256 keyed by the machine id's 16 bytes over the application id's, its first 16
    /// bytes with the version 4 and variant bits set, in Python's standard library.
    private func pythonReference(machineID: String) async throws -> String {
        let script = """
            import hmac, hashlib, sys
            h = bytearray(hmac.new(bytes.fromhex(sys.argv[1]), bytes.fromhex(sys.argv[2]), hashlib.sha256).digest()[:16])
            h[6] = (h[6] & 0x0F) | 0x40
            h[8] = (h[8] & 0x3F) | 0x80
            print(h.hex())
            """
        let run = try await ChildProcess.run("/usr/bin/python3", ["-c", script, machineID, LinkConfiguration.agentIDApplication],
                                             limit: .seconds(20))
        #expect(run.status == 0, "\(run.stderr)")
        return String(run.stdout.prefix { $0 != "\n" })
    }

    @Test func theDefault_isTheAppSpecificHash_notTheMachineID() async throws {
        let raw = try rawMachineID
        #expect(raw.count == 32)
        let derived = LinkConfiguration.machineAgentID()
        #expect(derived != "imagentd-" + raw)
        #expect(!derived.contains(raw))
        // The old default's format: imagentd- and 32 lower-case hex digits.
        #expect(derived.hasPrefix("imagentd-") && derived.count == 41, "\(derived)")
        #expect(derived.dropFirst(9).allSatisfy { $0.isHexDigit && !$0.isUppercase }, "\(derived)")
        let reference = try await pythonReference(machineID: raw)
        #expect(derived == "imagentd-" + reference, "python says \(reference)")
    }

    @Test(.enabled(if: access("/usr/bin/systemd-id128", X_OK) == 0, "needs systemd-id128(1)"))
    func theDefault_isWhatSystemdID128Derives() async throws {
        let run = try await ChildProcess.run("/usr/bin/systemd-id128",
                                             ["machine-id", "--app-specific=\(LinkConfiguration.agentIDApplication)"],
                                             limit: .seconds(20))
        #expect(run.status == 0, "\(run.stderr)")
        #expect(LinkConfiguration.machineAgentID() == "imagentd-" + String(run.stdout.prefix { $0 != "\n" }))
    }

    @Test func overMQTT_theClientIDAndTopicLevel_areTheDerivedID() throws {
        var daemon = DaemonConfiguration()
        daemon.server.endpoints = ["127.0.0.1:1883"]
        daemon.server.upstreamProtocol = .mqtt
        let link = LinkConfiguration(daemon)
        let derived = LinkConfiguration.machineAgentID()
        #expect(link.agentID == derived)
        let mqtt = try #require(link.mqtt)
        #expect(mqtt.clientID == derived)
        let topic = try mqtt.topics().up(service: "echo", session: 7)
        #expect(topic.split(separator: "/").contains(Substring(derived)), "\(topic)")
        #expect(!topic.contains(try rawMachineID), "\(topic)")
    }
}
