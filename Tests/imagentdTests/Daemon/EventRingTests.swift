import Testing

@testable import IMAgentCore

/// The history EVENTS answers with: link events apart from session events, each
/// uid's share bounded, everyone's and one's own for a non-admin, all merged in
/// order for an admin.
@Suite struct EventRingTests {
    private static let small = EventRing.Capacity(link: 3, perUID: 2, sessions: 4)

    private func event(_ time: UInt64, _ owner: UInt32? = nil) -> EventRing.Entry {
        .init(timeMS: time, owner: owner, json: "{\"n\":\(time)}")
    }

    @Test func keepsTheLastLinkEvents_oldestFirst_andTruncatesAnOutsizedOne() {
        var ring = EventRing(capacity: Self.small, maxEventBytes: 64)
        for time in 1...5 { ring.append(event(UInt64(time))) }
        #expect(ring.count == 3)
        #expect(ring.visible(to: 0, isAdmin: true).map(\.json) == ["{\"n\":3}", "{\"n\":4}", "{\"n\":5}"])
        #expect(ring.visible(to: 1000, isAdmin: false).map(\.timeMS) == [3, 4, 5])
        ring.append(.init(timeMS: 6, owner: nil, json: "{\"reason\":\"" + String(repeating: "x", count: 100) + "\"}"))
        #expect(ring.visible(to: 0, isAdmin: true).last?.json == #"{"event":"truncated","time_ms":6}"#)
        #expect(ring.count == 3)
    }

    @Test func aUidsChurn_pushesOutNeitherLinkEventsNorAnotherUidsEvents() {
        var ring = EventRing(capacity: Self.small, maxEventBytes: 64)
        ring.append(event(1))
        ring.append(event(2, 1000))
        ring.append(event(3))
        for time in 4...500 { ring.append(event(UInt64(time), 65534)) }
        #expect(ring.visible(to: 1000, isAdmin: false).map(\.timeMS) == [1, 2, 3])
        #expect(ring.visible(to: 65534, isAdmin: false).map(\.timeMS) == [1, 3, 499, 500])
        // An admin gets everything, merged in the order it happened.
        #expect(ring.visible(to: 0, isAdmin: true).map(\.timeMS) == [1, 2, 3, 499, 500])
        #expect(ring.count == 5)
    }

    @Test func whenAllUidsTogetherReachTheBound_theLargestShareGivesWay() {
        var ring = EventRing(capacity: Self.small, maxEventBytes: 64)
        ring.append(event(1, 1))
        ring.append(event(2, 2))
        ring.append(event(3, 2))
        ring.append(event(4, 3))
        // Full (4): uid 2 holds the most and gives up its oldest; uids 1 and 3 keep theirs.
        ring.append(event(5, 4))
        #expect(ring.visible(to: 0, isAdmin: true).map(\.timeMS) == [1, 3, 4, 5])
        // Now all hold one: the oldest of them (uid 1's) goes.
        ring.append(event(6, 3))
        #expect(ring.visible(to: 0, isAdmin: true).map(\.timeMS) == [3, 4, 5, 6])
        #expect(ring.visible(to: 1, isAdmin: false).isEmpty)
        #expect(ring.visible(to: 3, isAdmin: false).map(\.timeMS) == [4, 6])
        #expect(ring.count == 4)
    }

    /// imagentd(8) SECURITY states the bounds the daemon uses.
    @Test func theSecuritySection_statesTheBounds() {
        let page = readRepositoryFile("man/imagentd.8").split(separator: "\n").joined(separator: " ")
        let bounds = EventRing.Capacity()
        #expect(bounds.link == 256 && page.contains("EVENTS answers from the last 256 link and reload events"))
        #expect(bounds.perUID == 64 && page.contains("of which each uid keeps its last 64"))
        #expect(bounds.sessions == 512 && page.contains("together at most 512 (when they hold 512, the uid holding the most gives up its oldest)"))
    }
}
