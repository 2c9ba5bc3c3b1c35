import Glibc
import Testing

@testable import IMAgentCore

@Suite struct LogDestinationTests {
    @Test func journal_whenJournalStreamNamesStderrsDeviceAndInode() {
        #expect(LogDestination.detect(journalStream: "8:123456", stderrIdentity: (8, 123456)) == .journal)
    }

    @Test func stderr_whenStderrWasRedirectedElsewhere() {
        #expect(LogDestination.detect(journalStream: "8:123456", stderrIdentity: (8, 654321)) == .stderr)
        #expect(LogDestination.detect(journalStream: "9:123456", stderrIdentity: (8, 123456)) == .stderr)
    }

    @Test func stderr_withoutJournalStreamOrStderr_orWithAMalformedValue() {
        #expect(LogDestination.detect(journalStream: nil, stderrIdentity: (8, 1)) == .stderr)
        #expect(LogDestination.detect(journalStream: "8:1", stderrIdentity: nil) == .stderr)
        for malformed in ["", "8", "8:", ":1", "8:1:2", "x:1", "-8:1", "8:0x1"] {
            #expect(LogDestination.detect(journalStream: malformed, stderrIdentity: (8, 1)) == .stderr, "\(malformed)")
        }
    }
}

extension ProcessEnvironment {
    @Suite struct JournalStreamTests {
        @Test func current_isJournal_exactlyWhenJournalStreamMatchesThisProcesssStderr() throws {
            var status = stat()
            try #require(fstat(STDERR_FILENO, &status) == 0)
            // What systemd writes: "%lu:%lu" of st_dev and st_ino.
            withEnvironment(["JOURNAL_STREAM": "\(status.st_dev):\(status.st_ino)"]) {
                #expect(LogDestination.current() == .journal)
            }
            withEnvironment(["JOURNAL_STREAM": "\(status.st_dev):\(status.st_ino &+ 1)"]) {
                #expect(LogDestination.current() == .stderr)
            }
            withEnvironment(["JOURNAL_STREAM": nil]) {
                #expect(LogDestination.current() == .stderr)
            }
        }
    }
}
