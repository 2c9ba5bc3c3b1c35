import Logging
import Testing

@testable import IMAgentCore

@Suite struct StderrLogHandlerTests {
    @Test func line_hasTimeLevelLabelMessageAndSortedMetadata() {
        let line = StderrLogHandler.line(
            timestamp: "2025-06-01T12:00:00.123Z", level: .warning, label: "imagent.link", message: "link lost",
            metadata: ["reason": "timed out", "endpoint": "im.example.net:7443"])
        #expect(line == #"2025-06-01T12:00:00.123Z warning imagent.link: link lost endpoint=im.example.net:7443 reason="timed out""#)
    }

    @Test func line_staysOneLine_whenTheMessageOrAValueHasNewlines() {
        let line = StderrLogHandler.line(
            timestamp: nil, level: .info, label: "d", message: "a\nb", metadata: ["k": "x\ny"])
        #expect(line == #"info d: a\nb k="x\ny""#)
    }

    @Test func quoting_followsLogfmt() {
        #expect(StderrLogHandler.quoted("plain") == "plain")
        #expect(StderrLogHandler.quoted("") == #""""#)
        #expect(StderrLogHandler.quoted("a=b") == #""a=b""#)
        #expect(StderrLogHandler.quoted(#"say "hi" \ bye"#) == #""say \"hi\" \\ bye""#)
    }

    @Test func timestamp_isISO8601UTCWithMilliseconds() {
        let stamp = StderrLogHandler.utcTimestamp()
        let shape = stamp.map { $0.isNumber ? "9" : String($0) }.joined()
        #expect(shape == "9999-99-99T99:99:99.999Z")
    }
}
