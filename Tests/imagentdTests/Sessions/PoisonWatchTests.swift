import Testing

@testable import IMAgentCore

@Suite struct PoisonWatchTests {
    let written = MonotonicInstant.now

    /// The watch after a loss of the link `after` the message `seq` was written, and whether it reached the count.
    private func lost(_ watch: inout PoisonWatch, _ seq: UInt64, after: Duration = .zero) -> Bool {
        watch.linkLost(oldestUnacked: seq, writtenAt: written, lostAt: written + after)
    }

    @Test func theSameMessageInFlightAtThreeLosses_reachesTheCount() {
        var watch = PoisonWatch()
        let reached = [lost(&watch, 5, after: .milliseconds(3)), lost(&watch, 5, after: .seconds(1)), lost(&watch, 5, after: .seconds(10))]
        #expect(reached == [false, false, true])
        #expect(watch.losses == 3 && watch.seq == 5)
    }

    @Test func anotherMessage_startsTheCountOver() {
        var watch = PoisonWatch()
        let reached = [lost(&watch, 5), lost(&watch, 5), lost(&watch, 6)]
        #expect(reached == [false, false, false])
        #expect(watch.losses == 1 && watch.seq == 6)
    }

    @Test func itsAcknowledgement_clearsTheCount_anEarlierOneDoesNot() {
        var watch = PoisonWatch()
        _ = (lost(&watch, 5), lost(&watch, 5))
        watch.acknowledged(through: 4)
        #expect(watch.losses == 2)
        watch.acknowledged(through: 5)
        #expect(watch == PoisonWatch())
        let reached = lost(&watch, 5)
        #expect(!reached)
    }

    @Test func aLossLongAfterTheMessageWent_countsNeitherWay() {
        var watch = PoisonWatch()
        _ = (lost(&watch, 5), lost(&watch, 5))
        let reached = lost(&watch, 5, after: PoisonWatch.window + .milliseconds(1))
        #expect(!reached)
        #expect(watch.losses == 2)
    }

    @Test func theCulprit_isTheSuspectWrittenFirst() {
        let suspects = [PoisonWatch.Suspect(session: 1, seq: 9, writeOrder: 40), .init(session: 2, seq: 3, writeOrder: 12),
                        .init(session: 3, seq: 1, writeOrder: 30)]
        #expect(PoisonWatch.culprit(suspects)?.session == 2)
        #expect(PoisonWatch.culprit([]) == nil)
    }
}
