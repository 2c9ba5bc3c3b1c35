import Testing
@testable import imagent_cli

/// The CLI's own JSON parser and formatters, without a daemon.
@Suite struct CLIFormattingTests {
    @Test func jsonParser_keepsMemberOrder_andNumbersAsSent() throws {
        let value = try JSONParser.parse(#" {"b":18446744073709551615,"a":[1.5e3,true,null],"c":"\u00e9\ud83d\ude00\n"} "#)
        #expect(value.members?.map(\.key) == ["b", "a", "c"])
        #expect(value["b"] == .number("18446744073709551615"))
        #expect(value["a"] == .array([.number("1.5e3"), .bool(true), .null]))
        #expect(value["c"] == .string("é😀\n"))
        #expect(value.compactText == #"{"b":18446744073709551615,"a":[1.5e3,true,null],"c":"é😀\n"}"#)
    }

    @Test(arguments: [#"{"a":1,}"#, "[01]", #"{"a" 1}"#, "\"\u{01}\"", "tru", "1 2", "-", #""\x""#, "[1.]"])
    func jsonParser_refusesWhatRFC8259Refuses(_ text: String) {
        #expect(throws: JSONParser.SyntaxError.self) { try JSONParser.parse(text) }
    }

    @Test func jsonParser_refusesHostileNesting() {
        let deep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        #expect(throws: JSONParser.SyntaxError.self) { try JSONParser.parse(deep) }
    }

    @Test func prettyJSON_indentsByTwo() throws {
        #expect(try JSONParser.parse(#"{"a":[1],"b":{}}"#).prettyText == "{\n  \"a\": [\n    1\n  ],\n  \"b\": {}\n}")
    }

    @Test func durations_andTimes_readNaturally() {
        #expect(HumanFormat.duration(seconds: 42) == "42s")
        #expect(HumanFormat.duration(seconds: 3723) == "1h 2m 3s")
        #expect(HumanFormat.duration(seconds: 90061) == "1d 1h 1m")
        #expect(HumanFormat.duration(seconds: .string("soon")) == "soon")
        #expect(HumanFormat.duration(seconds: nil) == "-")
        #expect(HumanFormat.decimal(0.0425) == "0.043")
        #expect(HumanFormat.decimal(30) == "30")
        #expect(HumanFormat.timestamp(milliseconds: .number("0")) == "1970-01-01 00:00:00 UTC")
        #expect(HumanFormat.timestamp(milliseconds: .number("951782400000")) == "2000-02-29 00:00:00 UTC")
        #expect(HumanFormat.timeOfDay(milliseconds: .number("1700000001004")) == "22:13:21.004")
    }

    @Test func prometheusNames_keepOnlyLegalCharacters_andSkipNonNumbers() throws {
        #expect(PrometheusExposition.sanitized("rtt-ms.p99 é") == "rtt_ms_p99__")
        let metrics = try JSONParser.parse(#"{"counters":{"x_total":1,"name":"n/a","list":[1]},"histograms":{"h":{"sum":2}}}"#)
        #expect(PrometheusExposition.render(metrics) == [
            "# TYPE imagent_x_total counter", "imagent_x_total 1",
            "# TYPE imagent_h_sum untyped", "imagent_h_sum 2",
        ])
    }
}

/// `imagent status`'s lines for what an MQTT broker granted (`link.mqtt_broker`).
@Suite struct StatusBrokerGrantTests {
    static func status(_ grant: String?) throws -> JSONValue {
        try JSONParser.parse(#"{"link":{"state":"connected","reconnects":0"# + (grant.map { #","mqtt_broker":"# + $0 } ?? "")
            + #"},"daemon":{},"sessions":{}}"#)
    }

    @Test func aShortSessionExpiry_isSaidPlainly_withWhatItCosts() throws {
        let lines = StatusCommand.render(try Self.status(#"{"session_expiry_s":300,"session_expiry_requested_s":3600,"#
            + #""receive_maximum":1,"maximum_packet_size":268435460,"largest_message_bytes":268435200,"topic_alias_maximum":0,"#
            + #""maximum_qos":1,"retain_available":true,"shared_subscription_available":false,"server_keep_alive_s":null,"warnings":1}"#))
        #expect(lines.contains { $0.hasPrefix("mqtt broker:") && $0.hasSuffix("QoS up to 1, receive maximum 1, topic aliases 0, "
            + "retain yes, shared subscriptions no, keep-alive as asked") }, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("session expiry:") && $0.hasSuffix("300 s granted (3600 s requested): "
            + "an outage longer than that loses down messages at the broker") }, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("packet size:") && $0.hasSuffix("at most 256 MiB, largest message 256 MiB") }, "\(lines)")
        #expect(!lines.contains { $0.contains("mqtt_broker") }, "no generic copy of the same fields: \(lines)")
    }

    @Test func aPacketSizeBelowMaxPayload_isSaid_andAGrantedExpiryIsNotWarned() throws {
        let lines = StatusCommand.render(try Self.status(#"{"session_expiry_s":600,"session_expiry_requested_s":600,"#
            + #""receive_maximum":20,"maximum_packet_size":4096,"largest_message_bytes":3900,"topic_alias_maximum":10,"#
            + #""maximum_qos":2,"retain_available":true,"shared_subscription_available":true,"server_keep_alive_s":60,"warnings":1}"#))
        #expect(lines.contains { $0.hasPrefix("session expiry:") && $0.hasSuffix(" 600 s granted") }, "\(lines)")
        #expect(lines.contains { $0.hasSuffix("shared subscriptions yes, keep-alive 60 s (the broker's)") }, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("packet size:") && $0.hasSuffix("at most 4 KiB, largest message 3.8 KiB: "
            + "less than [limits] max_payload_bytes, larger messages fail with PAYLOAD_TOO_LARGE") }, "\(lines)")
    }

    @Test func withoutAnMQTTGrant_noBrokerLines() throws {
        let lines = StatusCommand.render(try Self.status(nil))
        #expect(!lines.contains { $0.hasPrefix("mqtt broker:") || $0.hasPrefix("session expiry:") || $0.hasPrefix("packet size:") }, "\(lines)")
    }
}

@Suite struct DoctorCheckTests {
    @Test func clock_failsBeyondTwoSecondsPlusTheRoundTrip_andSaysWhichWay() {
        #expect(DoctorCommand.clock(offsetMS: 1_500, rttMS: 10).line == "ok    clock: within 1.5 s of the server's")
        #expect(DoctorCommand.clock(offsetMS: 90_000, rttMS: 10).line
            == "FAIL  clock: 90 s behind the server's; synchronise it (timedatectl, NTP)")
        #expect(DoctorCommand.clock(offsetMS: -2_500, rttMS: 100).line
            == "FAIL  clock: 2.5 s ahead of the server's; synchronise it (timedatectl, NTP)")
        #expect(DoctorCommand.split("[::1]:7443")! == ("::1", "7443"))
        #expect(DoctorCommand.split("im.example.net:7443")! == ("im.example.net", "7443"))
        #expect(DoctorCommand.split("nohost") == nil)
        let day = 86_400_000.0
        #expect(DoctorCommand.certificate(expiresMS: 100 * day, nowMS: 10 * day).line
            == "ok    certificate: the server's certificate expires on 1970-04-11 00:00:00 UTC, in 90 days")
        #expect(DoctorCommand.certificate(expiresMS: 100 * day, nowMS: 95 * day).line
            == "FAIL  certificate: the server's certificate expires on 1970-04-11 00:00:00 UTC, in 5 days; tell the server's operator")
        #expect(DoctorCommand.certificate(expiresMS: 100 * day, nowMS: 101 * day).line
            == "FAIL  certificate: the server's certificate expired on 1970-04-11 00:00:00 UTC; tell the server's operator")
    }
}

/// `imagent status`'s lines for failed sessions (`sessions.failed_sessions`).
@Suite struct StatusFailedSessionsTests {
    @Test func aQuarantinedSession_isListedWithItsReason_escaped() throws {
        let status = try JSONParser.parse(#"{"link":{"state":"connected"},"daemon":{},"sessions":{"count":2,"failed":1,"#
            + #""failed_sessions":[{"session":7,"service":"x\u001b[31m","reason":"quarantined: the link was lost 3 times"}],"#
            + #""refused_total":0,"quarantined_total":1}}"#)
        let lines = StatusCommand.render(status)
        #expect(lines.contains { $0.hasPrefix("failed:") && $0.hasSuffix("1 sessions; since start 0 refused by the server, 1 quarantined") },
                "\(lines)")
        #expect(lines.contains { $0.hasPrefix("failed session:") && $0.hasSuffix("7 (x\\u{1B}[31m): quarantined: the link was lost 3 times") },
                "\(lines)")
        #expect(!lines.contains { $0.contains("sessions.failed") }, "no generic copy of the same fields: \(lines)")
    }

    @Test func noFailedSession_noLines() throws {
        let status = try JSONParser.parse(#"{"link":{},"daemon":{},"sessions":{"failed":0,"failed_sessions":[],"refused_total":0,"quarantined_total":0}}"#)
        #expect(!StatusCommand.render(status).contains { $0.hasPrefix("failed") })
    }
}
