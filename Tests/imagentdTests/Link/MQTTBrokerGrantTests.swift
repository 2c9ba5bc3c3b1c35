import Foundation
import MQTT5
import Testing

@testable import IMAgentCore

/// What the broker granted, in STATUS and the log (issue 30): ejabberd grants a session expiry of
/// 300 s whatever CONNECT asks, and a small Maximum Packet Size can make `max_payload_bytes` unsendable.
@Suite struct MQTTBrokerGrantTests {
    static func settings(expiry: UInt32 = 3_600, maxPayload: Int? = 1 << 20) -> MQTTLinkSettings {
        var settings = MQTTLinkSettings(clientID: "host-1", sessionExpirySeconds: expiry)
        settings.maxPayloadBytes = maxPayload
        return settings
    }

    @Test func aShorterSessionExpiry_isAWarning_sayingWhatAnOutageCosts() {
        var limits = BrokerLimits()
        limits.sessionExpiryInterval = 300
        let grant = MQTTBrokerGrant(limits, settings: Self.settings())
        #expect(grant.sessionExpiry == 300)
        #expect(grant.warnings.count == 1)
        #expect(grant.warnings.first?.contains("session expiry of 300 s, less than the 3600 s") == true)
        #expect(grant.warnings.first?.contains("outage longer than 300 s") == true)
    }

    @Test func theRequestedExpiry_orALongerOne_isNoWarning() {
        #expect(MQTTBrokerGrant(BrokerLimits(), settings: Self.settings()).warnings.isEmpty, "no Session Expiry in CONNACK: ours holds")
        var limits = BrokerLimits()
        limits.sessionExpiryInterval = 7_200
        #expect(MQTTBrokerGrant(limits, settings: Self.settings()).warnings.isEmpty)
    }

    @Test func aMaximumPacketSizeBelowMaxPayload_isAWarning() {
        var limits = BrokerLimits()
        limits.maximumPacketSize = 4_096
        let grant = MQTTBrokerGrant(limits, settings: Self.settings(maxPayload: 8_192))
        #expect(grant.largestUpBody < 4_096 && grant.largestUpBody > 0)
        #expect(grant.warnings.count == 1 && grant.warnings[0].contains("max_payload_bytes (8192)"), "\(grant.warnings)")
        #expect(MQTTBrokerGrant(limits, settings: Self.settings(maxPayload: 1_000)).warnings.isEmpty)
    }

    @Test func json_namesEveryGrantedLimit() throws {
        var limits = BrokerLimits()
        limits.sessionExpiryInterval = 300
        limits.receiveMaximum = 20
        limits.topicAliasMaximum = 100
        limits.sharedSubscriptionAvailable = false
        limits.serverKeepAlive = 60
        let object = try #require(try JSONSerialization.jsonObject(with: Data(MQTTBrokerGrant(limits, settings: Self.settings()).json.utf8)) as? [String: Any])
        #expect(object["session_expiry_s"] as? Int == 300 && object["session_expiry_requested_s"] as? Int == 3_600)
        #expect(object["receive_maximum"] as? Int == 20 && object["topic_alias_maximum"] as? Int == 100)
        #expect(object["shared_subscription_available"] as? Bool == false && object["retain_available"] as? Bool == true)
        #expect(object["server_keep_alive_s"] as? Int == 60 && object["maximum_packet_size"] != nil && object["warnings"] as? Int == 1)
    }
}
