import MQTT5
import Testing

@Suite struct SessionTopicsTests {
    @Test func upDownAndTheFilter_followTheIssuesNames() throws {
        let topics = try SessionTopics(prefix: "imagent", clientID: "host-1")
        #expect(try topics.up(service: "echo", session: 7) == "imagent/host-1/echo/7/up")
        #expect(try topics.down(service: "echo", session: 7) == "imagent/host-1/echo/7/down")
        #expect(topics.downFilter == "imagent/host-1/+/+/down")
        #expect(Topic.isValidFilter(topics.downFilter))
        #expect(Topic.isValidName(try topics.up(service: "chat é", session: 18_446_744_073_709_551_615)))
    }

    @Test func aMultiLevelPrefix_isAllowed() throws {
        let topics = try SessionTopics(prefix: "fleet/eu", clientID: "c")
        #expect(try topics.up(service: "s", session: 1) == "fleet/eu/c/s/1/up")
        #expect(topics.parseDown("fleet/eu/c/s/1/down").map { "\($0.service) \($0.session)" } == "s 1")
    }

    @Test(arguments: ["a/b", "+", "a+", "#", "x#", "nul\u{0}", ""])
    func aServiceThatCannotBeOneTopicLevel_isRefused(service: String) throws {
        let topics = try SessionTopics(prefix: "imagent", clientID: "c")
        #expect(throws: SessionTopics.NamingError.self) { _ = try topics.up(service: service, session: 1) }
        #expect(throws: SessionTopics.NamingError.self) { try SessionTopics.checkService(service) }
    }

    @Test func aClientIDOrPrefixWithWildcardsOrSlashes_isRefused() {
        for (prefix, clientID) in [("imagent", "a/b"), ("imagent", "+"), ("imagent", ""), ("im#", "c"), ("a//b", "c"), ("", "c"), ("/a", "c")] {
            #expect(throws: SessionTopics.NamingError.self, "\(prefix) \(clientID)") { _ = try SessionTopics(prefix: prefix, clientID: clientID) }
        }
    }

    @Test func parseDown_acceptsOnlyThisClientsDownTopics() throws {
        let topics = try SessionTopics(prefix: "imagent", clientID: "c")
        #expect(topics.parseDown("imagent/c/echo/42/down").map { "\($0.service) \($0.session)" } == "echo 42")
        #expect(topics.parseDown("imagent/c/écho/18446744073709551615/down").map { "\($0.service) \($0.session)" }
                == "écho 18446744073709551615")
        for other in ["imagent/c/echo/42/up", "imagent/d/echo/42/down", "imagent/c/echo/x/down", "imagent/c/echo/042/down",
                      "imagent/c/echo/0/down", "imagent/c/a/b/42/down", "imagent/c//42/down", "imagent/c/down",
                      "imagent/c/echo/+42/down", "imagent/c/echo//down", "imagent/c/echo/42/down/", "imagent/c/echo/42/xdown",
                      "imagent/c/echo/18446744073709551616/down", "imagent/cc/echo/42/down", "imagent/c/echo/4 2/down"] {
            #expect(topics.parseDown(other) == nil, "\(other)")
        }
    }

    @Test func aTopicLongerThanMQTTAllows_isRefused() throws {
        let topics = try SessionTopics(prefix: String(repeating: "p", count: 65_500), clientID: "c")
        #expect(throws: SessionTopics.NamingError.self) { _ = try topics.up(service: String(repeating: "s", count: 255), session: 1) }
    }
}
