import Foundation
import IMAgentTestKit
import IMLink
import MQTT5
import NIOCore
import Testing

@testable import IMAgentCore

/// A broker that refuses the login (issue 30): the password is read again and the login retried,
/// at once when the token changed; only codes that can never succeed stop the link. The table
/// here is the one in imagent-mqtt(7), FAILURES.
@Suite struct MQTTRefusedLoginTests {
    /// What each CONNACK failure code becomes: the IMLink code the engine acts on.
    static let connackTable: [(ReasonCode, WireCode)] = [
        (.unspecifiedError, .protocolError), (.malformedPacket, .protocolError), (.protocolError, .protocolError),
        (.implementationSpecificError, .protocolError), (.unsupportedProtocolVersion, .versionUnsupported),
        (.clientIdentifierNotValid, .forbidden), (.badUserNameOrPassword, .tokenInvalid), (.notAuthorized, .tokenInvalid),
        (.serverUnavailable, .overloaded), (.serverBusy, .overloaded), (.banned, .forbidden),
        (.badAuthenticationMethod, .forbidden), (.topicNameInvalid, .protocolError), (.packetTooLarge, .protocolError),
        (.quotaExceeded, .overloaded), (.payloadFormatInvalid, .protocolError), (.retainNotSupported, .protocolError),
        (.qosNotSupported, .protocolError), (.useAnotherServer, .shutdown), (.serverMoved, .shutdown),
        (.connectionRateExceeded, .overloaded),
    ]

    @Test func everyCONNACKFailureCode_hasItsDocumentedClass() throws {
        let allowed = (0x80...0xFF).compactMap { ReasonCode(rawValue: UInt8($0)) }.filter { $0.isAllowed(in: .connack) }
        #expect(Set(allowed) == Set(Self.connackTable.map(\.0)), "the table covers every failure code CONNACK may carry")
        for (code, expected) in Self.connackTable {
            var adapter = try MQTTLinkAdapterTests.adapter()
            _ = adapter.send(.login(Login(token: ByteBuffer(string: "old"), agentID: "host-1")))
            let outputs = adapter.received(.connack(ConnAck(sessionPresent: false, reasonCode: code)))
            let got: WireCode? = switch outputs.first {
            case .frame(.loginFail(let fail)): fail.code
            case .frame(.error(let error)): error.code
            case .frame(.goaway(let goaway)): goaway.code
            default: nil
            }
            #expect(got == expected, "CONNACK \(code): \(outputs)")
            #expect(outputs.contains { $0.endsLink }, "CONNACK \(code) ends the connection")
        }
    }

    @Test func theManPagesTable_saysWhatTheCodeDoes() throws {
        let page = try String(contentsOfFile: URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("man/imagent-mqtt.7").path, encoding: .utf8)
        let rows = page.components(separatedBy: ".TS\n").dropFirst().first?.components(separatedBy: ".TE\n").first?
            .split(separator: "\n").filter { $0.hasPrefix("0x") } ?? []
        var documented: [ReasonCode: WireCode] = [:]
        for row in rows {
            let columns = row.split(separator: "\t")
            guard columns.count == 3, let code = UInt8(columns[0].dropFirst(2), radix: 16).flatMap(ReasonCode.init) else {
                Issue.record("row \(row)")
                continue
            }
            let said = columns[2]
            documented[code] = said.contains("(TOKEN_INVALID)") ? .tokenInvalid : said.contains("(FORBIDDEN)") ? .forbidden
                : said.contains("(VERSION_UNSUPPORTED)") ? .versionUnsupported : said.contains("(OVERLOADED)") ? .overloaded
                : said.contains("(GOAWAY SHUTDOWN)") ? .shutdown : .protocolError
        }
        #expect(documented == Dictionary(uniqueKeysWithValues: Self.connackTable), "imagent-mqtt(7) FAILURES")
    }

    @Test func notAuthorizedOnAnEstablishedLink_backsOff_neverStops() throws {
        var adapter = try MQTTLinkAdapterTests.connected()
        let outputs = adapter.received(.disconnect(Disconnect(reasonCode: .notAuthorized)))
        guard case .frame(.error(let error)) = outputs.first else { Issue.record("\(outputs)"); return }
        #expect(error.code == .tokenInvalid)
        var machine = makeMachine()
        let attempt = connectedMachine(&machine, now: at(0))
        _ = machine.errorFrame(attempt, code: error.code, now: at(40))
        let closed = machine.connectionClosed(attempt, reason: "closed", now: at(40))
        #expect(closed.armedTimer?.purpose == .backoff, "a backoff, not Stopped: \(closed)")
    }

    @Test func tokenInvalid_overMQTT_readsTheTokenAgain_andAChangedOneConnectsAtOnce() {
        var machine = makeMQTTMachine()
        let attempt = startAndReachLogin(&machine)
        let fail = machine.loginFail(attempt, code: .tokenInvalid, retryAfter: nil, now: at(1))
        #expect(fail.last == .checkTokenChanged, "the token is read again at once: \(fail)")
        let closed = machine.connectionClosed(attempt, reason: "closed by the broker", now: at(1))
        guard let backoff = closed.armedTimer, backoff.purpose == .backoff else {
            Issue.record("an unchanged token waits for the backoff: \(closed)")
            return
        }
        let changed = machine.tokenChanged(now: at(2))
        #expect(changed.first == .cancelTimer(backoff.id))
        #expect(changed.last == .obtainToken(attempt.next, dropCached: true), "a new token connects at once: \(changed)")
        #expect(machine.reconnectPolicy.window == .seconds(4), "the refusal still counts: the window grew once")
    }

    @Test func aChangedTokenWhileTheRefusedConnectionCloses_reconnectsAtOnceAfterIt() {
        var machine = makeMQTTMachine()
        let attempt = startAndReachLogin(&machine)
        _ = machine.loginFail(attempt, code: .tokenInvalid, retryAfter: nil, now: at(1))
        #expect(machine.tokenChanged(now: at(1)).isEmpty)
        let closed = machine.connectionClosed(attempt, reason: "closed by the broker", now: at(1))
        #expect(closed.last == .obtainToken(attempt.next, dropCached: true), "\(closed)")
    }

    @Test func anUnchangedToken_retriesOnTheBackoffForever_withAFreshRead() {
        var machine = makeMQTTMachine()
        var attempt = startAndReachLogin(&machine)
        for round in 0..<8 {
            let now = at(Double(100 * round))
            _ = machine.loginFail(attempt, code: .tokenInvalid, retryAfter: nil, now: now)
            let closed = machine.connectionClosed(attempt, reason: "closed", now: now)
            guard let backoff = closed.armedTimer, backoff.purpose == .backoff else {
                Issue.record("round \(round): \(closed)")
                return
            }
            #expect(backoff.deadline <= now + .seconds(60), "never longer than the backoff cap")
            let retry = machine.backoffElapsed(backoff.id, now: backoff.deadline)
            #expect(retry.last == .obtainToken(attempt.next, dropCached: true))
            attempt = attempt.next
            _ = machine.tokenObtained(attempt, now: backoff.deadline)
            _ = machine.resolved(attempt, addresses: addresses, now: backoff.deadline)
            _ = machine.tcpConnected(attempt, now: backoff.deadline)
            _ = machine.helloOK(attempt, hello, now: backoff.deadline)
        }
    }

    @Test func tokenInvalid_overIMLink_keepsWireMDsRule_noEarlyRead() {
        var machine = makeMachine()
        let attempt = startAndReachLogin(&machine)
        let fail = machine.loginFail(attempt, code: .tokenInvalid, retryAfter: nil, now: at(1))
        #expect(!fail.contains(.checkTokenChanged))
    }

    private func makeMQTTMachine() -> Machine {
        var configuration = Machine.Configuration(endpoints: [Endpoint(parsing: "a.example:1883")!])
        configuration.retriesChangedTokenAtOnce = true
        return Machine(configuration: configuration, random: SplitMix64(seed: 1))
    }
}
