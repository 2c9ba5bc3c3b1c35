import Testing

@testable import IMAgentCore

/// `[server] protocol` and `[mqtt]` (imagentd.toml(5), imagent-mqtt(7)).
@Suite struct MQTTConfigTests {
    @Test func defaults_areIMLink_andTheDocumentedMQTTValues() throws {
        let c = try ConfigLoader.load(text: "", file: "f")
        #expect(c.server.upstreamProtocol == .imlink)
        #expect(c.mqtt == DaemonConfiguration.MQTTSettings())
        #expect(c.mqtt.clientID == "" && c.mqtt.username == "" && c.mqtt.sessionExpirySeconds == 86_400 && c.mqtt.topicPrefix == "imagent")
        #expect(LinkConfiguration(c).mqtt == nil, "IMLink unless protocol = \"mqtt\"")
    }

    @Test func readsEveryKey_intoTheLinkConfiguration() throws {
        let c = try ConfigLoader.load(text: """
            [server]
            endpoints = ["broker.example.net:8883"]
            agent_id = "host-7"
            protocol = "mqtt"
            [auth]
            token_file = "/etc/imagent/token"
            [mqtt]
            client_id = "fleet-host-7"
            username = "device"
            session_expiry_seconds = 3600
            topic_prefix = "acme/im"
            """, file: "f")
        #expect(c.server.upstreamProtocol == .mqtt)
        let link = try #require(LinkConfiguration(c).mqtt)
        var expected = MQTTLinkSettings(clientID: "fleet-host-7", username: "device", passwordFromToken: true,
                                        sessionExpirySeconds: 3600, topicPrefix: "acme/im")
        expected.maxPayloadBytes = 1 << 20  // [limits] max_payload_bytes' default, for the broker limit's warning
        #expect(link == expected)
        #expect(try link.topics().downFilter == "acme/im/fleet-host-7/+/+/down")
    }

    @Test func clientID_defaultsToTheAgentID_andNoAuthMeansNoPassword() throws {
        let c = try ConfigLoader.load(text: "[server]\nagent_id = \"host-9\"\nprotocol = \"mqtt\"\n", file: "f")
        let link = try #require(LinkConfiguration(c).mqtt)
        #expect(link.clientID == "host-9" && link.username == nil && !link.passwordFromToken)
        #expect(c.linkToken == .absent, "a broker may take anonymous clients: no token stage to fail")
        #expect(try ConfigLoader.load(text: "", file: "f").linkToken == .credential(LinkConfiguration.defaultCredential))
    }

    @Test func badValues_areReportedWithTheirLines() {
        let text = """
            [server]
            protocol = "amqp"
            [mqtt]
            client_id = "a/b"
            session_expiry_seconds = -1
            topic_prefix = "x/+/y"
            username = 7
            qos = 2
            """
        do {
            _ = try ConfigLoader.load(text: text, file: "/etc/imagent/imagentd.toml")
            Issue.record("accepted")
        } catch {
            #expect(error.problems.map(\.description) == [
                "/etc/imagent/imagentd.toml:2: server.protocol: expected one of \"imlink\", \"mqtt\"",
                "/etc/imagent/imagentd.toml:4: mqtt.client_id: client_id \"a/b\" cannot be used in an MQTT topic: '/' separates topic levels",
                "/etc/imagent/imagentd.toml:5: mqtt.session_expiry_seconds: -1 is out of range 0–4294967295",
                "/etc/imagent/imagentd.toml:6: mqtt.topic_prefix: topic_prefix \"x/+/y\" cannot be used in an MQTT topic: '+' is an MQTT wildcard",
                "/etc/imagent/imagentd.toml:7: mqtt.username: expected a string, found an integer",
                "/etc/imagent/imagentd.toml:8: unknown key \"qos\" in [mqtt]; its keys are client_id, username, session_expiry_seconds, topic_prefix",
            ])
        }
    }

    @Test func anAgentIDThatCannotBeAClientID_isReportedAtItsLine_unlessClientIDIsSet() throws {
        let text = "[server]\nprotocol = \"mqtt\"\nagent_id = \"rack/7\"\n"
        do {
            _ = try ConfigLoader.load(text: text, file: "f")
            Issue.record("accepted")
        } catch {
            #expect(error.problems.map(\.description) == [
                "f:3: server.agent_id is the MQTT client id when [mqtt] client_id is not set: client_id \"rack/7\" cannot be used in an MQTT topic: '/' separates topic levels; set [mqtt] client_id",
            ])
        }
        _ = try ConfigLoader.load(text: text + "[mqtt]\nclient_id = \"rack-7\"\n", file: "f")
        _ = try ConfigLoader.load(text: "[server]\nagent_id = \"rack/7\"\n", file: "f")  // IMLink: any agent id
    }

    @Test func anAgentIDThatCannotBeATopicLevel_isAConfigurationError() {
        var link = LinkConfiguration(endpoints: ["127.0.0.1:1883"], token: .absent, agentID: "a+b")
        link.mqtt = MQTTLinkSettings(clientID: "a+b")
        #expect(throws: LinkConfigurationError.self) { _ = try link.validated() }
    }
}
