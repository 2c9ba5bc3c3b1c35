import Testing

@testable import IMAgentCore

/// The limit on log lines that outside input triggers (imagentd(8), LOGGING), as a pure value.
@Suite struct OutsideLogLimiterTests {
    private let t0 = MonotonicInstant(sinceOrigin: .seconds(1_000))

    private func at(_ seconds: Double) -> MonotonicInstant {
        t0 + .milliseconds(Int64(seconds * 1_000))
    }

    @Test func aFloodFromOneUid_writesItsShare_thenOneSummaryWithTheCount() {
        var limiter = OutsideLogLimiter()
        var written = 0
        for index in 0..<3_903 {
            let (write, summaries) = limiter.admit(.protocolViolation, from: .uid(65534), now: at(Double(index) * 0.001))
            if write { written += 1 }
            #expect(summaries.isEmpty)
        }
        #expect(written == 5)
        #expect(limiter.nextSummary == at(10))
        #expect(limiter.due(now: at(9.9)).isEmpty)
        let summaries = limiter.due(now: at(10))
        #expect(summaries.map(\.text) == ["closing a client that broke the protocol: … and 3,898 more like it from uid 65534 in the last 10 s"])
        #expect(limiter.trackedKeys == 0 && limiter.nextSummary == nil)
        // A new window: the uid gets its share again.
        #expect(limiter.admit(.protocolViolation, from: .uid(65534), now: at(10.5)).write)
    }

    @Test func aWindowThatEndedUnnoticed_isSummarisedByTheNextLine_withWhenItEnded() {
        var limiter = OutsideLogLimiter()
        for _ in 0..<7 { _ = limiter.admit(.noHello, from: .uid(1000), now: at(0)) }
        let (write, summaries) = limiter.admit(.protocolViolation, from: .uid(1001), now: at(25))
        #expect(write)
        #expect(summaries.map(\.text) == ["closing a client that sent no HELLO: … and 2 more like it from uid 1000 in 10 s, until 15 s ago"])
    }

    @Test func oneUidsFlood_leavesAnotherUidAndKindTheirShare() {
        var limiter = OutsideLogLimiter()
        for _ in 0..<10_000 { _ = limiter.admit(.protocolViolation, from: .uid(65534), now: at(1)) }
        #expect(limiter.admit(.protocolViolation, from: .uid(1000), now: at(1)).write)
        #expect(limiter.admit(.noHello, from: .uid(65534), now: at(1)).write)
        #expect(limiter.admit(.publishForNoSession, from: .broker, now: at(1)).write)
    }

    @Test func manySources_togetherWriteNoMoreThanTheGlobalCap_andEachIsSummarised() {
        var limiter = OutsideLogLimiter()
        var written = 0
        for uid in UInt32(2_000)..<2_040 {
            for _ in 0..<100 where limiter.admit(.protocolViolation, from: .uid(uid), now: at(2)).write { written += 1 }
        }
        #expect(written == limiter.limits.global)
        let summaries = limiter.due(now: at(12))
        #expect(summaries.count == 40)
        #expect(summaries.reduce(0) { $0 + $1.suppressed } == 40 * 100 - limiter.limits.global)
    }

    @Test func theTable_isBounded_andSourcesBeyondItFoldIntoOneKey() {
        var limiter = OutsideLogLimiter()
        for uid in UInt32(0)..<10_000 {
            _ = limiter.admit(.noHello, from: .uid(uid), now: at(Double(uid) * 0.0001))
            #expect(limiter.trackedKeys <= limiter.limits.maxKeys)
        }
        let summaries = limiter.due(now: at(20))
        #expect(summaries.count <= limiter.limits.maxKeys)
        let folded = summaries.first { $0.key == .overflow }
        #expect(folded?.text == "… and \(OutsideLogLimiter.Summary.grouped(folded?.suppressed ?? 0)) more lines from other sources in 10 s, until 9 s ago")
        #expect(summaries.reduce(0) { $0 + $1.suppressed } == 10_000 - limiter.limits.global)
    }

    @Test func numbers_areGroupedByThousands() {
        #expect(OutsideLogLimiter.Summary.grouped(7) == "7")
        #expect(OutsideLogLimiter.Summary.grouped(3_898) == "3,898")
        #expect(OutsideLogLimiter.Summary.grouped(1_234_567) == "1,234,567")
    }

    @Test func outsideText_isCutBetweenCharacters_toABoundedSize() {
        #expect(LogText.bounded("short") == "short")
        let long = String(repeating: "é", count: 30_000)
        let cut = LogText.bounded(long)
        #expect(cut.hasPrefix(String(repeating: "é", count: 100)))
        #expect(cut.hasSuffix("… (59800 more bytes)"), "\(cut.suffix(30))")
        #expect(cut.utf8.count < LogText.maxBytes + 40)
    }
}
