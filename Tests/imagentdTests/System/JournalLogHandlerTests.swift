import Logging
import Testing

@testable import IMAgentCore

@Suite struct JournalLogHandlerTests {
    @Test func fields_carryMessagePriorityIdentifierCodeLocationAndEveryMetadataKey() {
        let fields = JournalLogHandler.fields(
            level: .warning,
            message: "link lost",
            metadata: ["endpoint": "im.example.net:7443", "attempt": "3", "session-id": .stringConvertible(81985529216486895)],
            label: "imagent.link",
            file: "imagentd/Link/LinkDriver.swift",
            function: "fail(_:)",
            line: 42)
        #expect(fields == [
            "MESSAGE=link lost",
            "PRIORITY=4",
            "SYSLOG_IDENTIFIER=imagentd",
            "CODE_FILE=imagentd/Link/LinkDriver.swift",
            "CODE_LINE=42",
            "CODE_FUNC=fail(_:)",
            "IMAGENT_LOGGER=imagent.link",
            "IMAGENT_ATTEMPT=3",
            "IMAGENT_ENDPOINT=im.example.net:7443",
            "IMAGENT_SESSION_ID=81985529216486895",
        ])
    }

    @Test func fields_keepAMultiLineMessageWholeAndAddTheError() {
        let fields = JournalLogHandler.fields(
            level: .error, message: "first\nsecond", error: "ECONNREFUSED", metadata: [:],
            label: "l", file: "f", function: "g", line: 1)
        #expect(fields.first == "MESSAGE=first\nsecond")
        #expect(fields.last == "IMAGENT_ERROR=ECONNREFUSED")
    }

    @Test(arguments: [
        (Logger.Level.trace, 7), (.debug, 7), (.info, 6), (.notice, 5), (.warning, 4), (.error, 3), (.critical, 2),
    ])
    func priority_followsSyslogNumbering(level: Logger.Level, priority: Int) {
        #expect(JournalLogHandler.priority(level) == priority)
    }

    @Test func fieldNames_areUpperCasedPrefixedAndLimitedToWhatTheJournalAccepts() {
        #expect(JournalLogHandler.journalFieldName("endpoint") == "IMAGENT_ENDPOINT")
        #expect(JournalLogHandler.journalFieldName("imagent.session") == "IMAGENT_SESSION")
        #expect(JournalLogHandler.journalFieldName("IMAGENT_RTT_MS") == "IMAGENT_RTT_MS")
        #expect(JournalLogHandler.journalFieldName("peer uid/gid") == "IMAGENT_PEER_UID_GID")
        #expect(JournalLogHandler.journalFieldName("größe") == "IMAGENT_GR__E")
        // A key posing as a journal field stays in the daemon's namespace.
        #expect(JournalLogHandler.journalFieldName("_PID") == "IMAGENT__PID")
        let long = JournalLogHandler.journalFieldName(String(repeating: "k", count: 100))
        #expect(long.utf8.count == 64 && long.hasPrefix("IMAGENT_KKK"))
    }

    @Test func metadata_callWinsOverProviderWinsOverHandler() {
        let provider = Logger.MetadataProvider { ["request": "from-provider", "task": "7"] }
        let merged = Logger.Metadata.merged(
            handler: ["request": "from-handler", "client": "cli"],
            provider: provider,
            event: ["request": "from-call"])
        #expect(merged == ["request": "from-call", "client": "cli", "task": "7"])
    }

    @Test func handlersFollowTheLiveLevel_untilOneIsSetOnItsOwn() {
        let shared = LiveLogLevel(.info)
        var journal = JournalLogHandler(label: "a", level: shared)
        let stderr = StderrLogHandler(label: "b", level: shared)
        #expect(journal.logLevel == .info && stderr.logLevel == .info)
        shared.level = .debug
        #expect(journal.logLevel == .debug && stderr.logLevel == .debug)
        journal.logLevel = .error
        shared.level = .trace
        #expect(journal.logLevel == .error && stderr.logLevel == .trace)
    }

    @Test func configurationLevels_mapOntoSwiftLogLevelsByName() {
        for level in DaemonConfiguration.LogLevel.allCases {
            #expect("\(Logger.Level(level))" == level.rawValue)
        }
    }
}
