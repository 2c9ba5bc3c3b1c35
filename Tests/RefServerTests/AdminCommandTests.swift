import JSONText
import IMLink
import NIOCore
@testable import RefServer
import Testing

@Suite("Admin command parsing, JSON and idle rules")
struct AdminCommandTests {
    @Test(arguments: [
        ("goaway", AdminCommand.goaway(code: .shutdown, retryAfterMS: nil, redirect: nil)),
        ("goaway OVERLOADED 500 REDIRECT [::1]:7000", .goaway(code: .overloaded, retryAfterMS: 500, redirect: "[::1]:7000")),
        ("goaway 9 100 host:1", .goaway(code: .shutdown, retryAfterMS: 100, redirect: "host:1")),
        ("fail-login token_expired", .failLogin(code: .tokenExpired, retryAfterMS: nil, count: 1)),
        ("fail-login 6 250 3", .failLogin(code: .overloaded, retryAfterMS: 250, count: 3)),
        ("drop", .drop),
        ("drop-after 4", .dropAfter(frames: 4)),
        ("drop-on-data 7", .dropOnData(session: 7)),
        ("drop-on-data OFF", .dropOnData(session: nil)),
        ("stall on", .stall(true)),
        ("STALL off", .stall(false)),
        ("nat-timeout 1.5", .natTimeout(.milliseconds(1500))),
        ("nat-timeout off", .natTimeout(nil)),
        ("heartbeat 250", .heartbeat(ms: 250)),
        ("push all 10 64 5", .push(.all, count: 10, size: 64, rate: 5)),
        ("push 42 1 2 0", .push(.session(42), count: 1, size: 2, rate: 0)),
        ("  stats  ", .stats),
    ])
    func parse_acceptsEveryCommand(line: String, command: AdminCommand) throws {
        #expect(try AdminCommand.parse(line) == command)
    }

    @Test(arguments: ["", "fly", "goaway NOPE", "drop-after 0", "drop-after x", "drop-on-data", "drop-on-data x", "stall maybe", "nat-timeout -1",
                      "heartbeat 0", "push all 1 2", "fail-login", "stats now"])
    func parse_refusesMalformedLines(line: String) {
        #expect(throws: AdminCommandError.self) { try AdminCommand.parse(line) }
    }

    @Test func jsonWriter_escapesAndNests() {
        var json = JSONWriter()
        json.beginObject()
        json.field("a", 1)
        json.field("s", "q\"\\\n\u{1}")
        json.beginArray("l")
        json.beginObject()
        json.field("b", true)
        json.endObject()
        json.endArray()
        json.endObject()
        #expect(json.text == #"{"a":1,"s":"q\"\\\n\u0001","l":[{"b":true}]}"#)
    }

    @Test func idlePolicy_blackHolesThenCloses() {
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
        let policy = IdlePolicy(natTimeout: .seconds(2), blackHoleLinger: .seconds(10))
        let heartbeat = IdlePolicy.silenceLimit(heartbeatMS: 1000)
        #expect(heartbeat == .seconds(3))
        #expect(IdlePolicy.handshakeSilenceLimit(heartbeatMS: 1000) == .seconds(10))
        #expect(policy.verdict(now: start + .seconds(1), lastReceived: start, lastSent: start + .milliseconds(500),
                               silenceLimit: .seconds(15), blackHoledSince: nil) == .keep)
        #expect(policy.verdict(now: start + .seconds(2), lastReceived: start, lastSent: start,
                               silenceLimit: .seconds(15), blackHoledSince: nil) == .blackHole)
        let quiet = IdlePolicy(natTimeout: nil, blackHoleLinger: .seconds(10))
        #expect(quiet.verdict(now: start + .seconds(2), lastReceived: start, lastSent: start + .seconds(2),
                              silenceLimit: heartbeat, blackHoledSince: nil) == .keep)
        #expect(quiet.verdict(now: start + .seconds(3), lastReceived: start, lastSent: start + .seconds(2),
                              silenceLimit: heartbeat, blackHoledSince: nil) == .close)
        #expect(policy.verdict(now: start + .seconds(12), lastReceived: start, lastSent: start,
                               silenceLimit: heartbeat, blackHoledSince: start + .seconds(2)) == .closeSilently)
    }
}
