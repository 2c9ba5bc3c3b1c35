import AgentIPC
import Foundation
import Testing
@testable import imagent_cli

/// Text from the daemon reaches a terminal with every control escaped (`TerminalText`): another
/// user's service name `ESC]0;…BEL ESC[31m` cannot retitle or recolour an admin's terminal.
@Suite struct CLITerminalEscapeTests {
    /// A title change, a colour, a CSI in its C1 form, DEL, a line break, a bidi override.
    static let hostile = "\u{1B}]0;pwned\u{7}\u{1B}[31mred\u{9B}2J\u{7F}x\nfake\u{202E}txt"

    /// A byte a terminal may act on: C0 but the line feed, DEL, or a C1 control (UTF-8 C2 80–C2 9F).
    static func rawControls(_ text: String) -> [String] {
        text.unicodeScalars.filter { TerminalText.isUnsafe($0) && $0 != "\n" }.map { "U+" + String($0.value, radix: 16, uppercase: true) }
    }

    @Test func terminalText_escapesEveryControl_andKeepsOtherText() {
        for value: UInt32 in [0x00, 0x07, 0x09, 0x0A, 0x1B, 0x1F, 0x7F, 0x80, 0x9B, 0x9F, 0x2028, 0x2029, 0x061C, 0x200E, 0x200F,
                              0x202A, 0x202E, 0x2066, 0x2069] {
            let scalar = Unicode.Scalar(value)!
            #expect(TerminalText.escaped("a" + String(Character(scalar)) + "b") == "a\\u{\(String(value, radix: 16, uppercase: true))}b")
        }
        for kept in ["echo", " ~", "\u{A0}é", "\u{2027}\u{202F}\u{2065}\u{206A}", "😀", "chat/é"] {
            #expect(TerminalText.escaped(kept) == kept)
        }
        #expect(TerminalText.escapedLines("a\u{1B}\nb\tc") == "a\\u{1B}\nb\\u{9}c")
    }

    @Test func sessions_showsAHostileServiceName_withoutRawEscapes() async throws {
        var script = FakeDaemon.Script()
        script.sessions = """
            {"sessions":[{"session":7,"service":\(JSONValue.quoted(Self.hostile)),"state":"failed",\
            "reason":\(JSONValue.quoted("SERVICE refused: " + Self.hostile)),"priority":1,"owner":65534,"attached":false,\
            "sent_seq":1,"acked_seq":0,"delivered_seq":0,"received_seq":0,"outbox":1,"inbox":0}]}
            """
        try await withFakeDaemon(script) { daemon in
            let human = try await ImagentProcess.run(["sessions"], against: daemon)
            #expect(human.status == 0, "\(human.stderr)")
            #expect(Self.rawControls(human.stdout).isEmpty, "raw \(Self.rawControls(human.stdout)) in \(human.stdout.debugDescription)")
            #expect(human.stdoutLines.count == 2, "one header, one row: \(human.stdoutLines)")
            #expect(human.stdout.contains("\\u{1B}]0;pwned\\u{7}\\u{1B}[31mred\\u{9B}2J\\u{7F}x\\u{A}fake\\u{202E}txt"), "\(human.stdout)")

            let json = try await ImagentProcess.run(["sessions", "--json"], against: daemon)
            #expect(json.status == 0, "\(json.stderr)")
            #expect(Self.rawControls(json.stdout).isEmpty, "raw \(Self.rawControls(json.stdout)) in \(json.stdout.debugDescription)")
            let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
            let service = ((object?["sessions"] as? [[String: Any]])?.first?["service"]) as? String
            #expect(service == Self.hostile, "JSON escapes, and the name reads back exactly")
        }
    }

    @Test func anErrorMessageFromTheDaemon_isEscapedOnStandardError() async throws {
        var script = FakeDaemon.Script()
        script.refusals[.sessions] = .init(code: .internal, message: Self.hostile)
        try await withFakeDaemon(script) { daemon in
            let result = try await ImagentProcess.run(["sessions"], against: daemon)
            #expect(result.status != 0)
            #expect(Self.rawControls(result.stderr).isEmpty, "raw \(Self.rawControls(result.stderr)) in \(result.stderr.debugDescription)")
            #expect(result.stderr.contains("\\u{1B}]0;pwned"), "\(result.stderr)")
        }
    }
}

