import Testing

@testable import IMAgentCore

/// The failure class the sessions are told when an established link is lost
/// (`LinkSessionDelegate.linkLost(reason:cause:)`): only `.serverRefusing` may count against
/// the message in flight (`PoisonWatch`, imagentd(8) QUARANTINE).
@Suite struct LinkLossCauseTests {
    private func lost(_ event: (inout Machine, AttemptID) -> Void) -> ReconnectPolicy.FailureClass? {
        var machine = makeMachine()
        let attempt = connectedMachine(&machine, now: at(0))
        event(&machine, attempt)
        #expect(!machine.phase.isConnected)
        return machine.lastFailure
    }

    @Test func theServersSideClosingOrAnError_isServerRefusing() {
        #expect(lost { _ = $0.connectionClosed($1, reason: "closed by the server", now: at(5)) } == .serverRefusing)
        #expect(lost { _ = $0.errorFrame($1, code: .protocolError, now: at(5)) } == .serverRefusing)
        #expect(lost { _ = $0.goaway($1, code: .shutdown, retryAfter: nil, redirect: nil, now: at(5)) } == .serverRefusing)
    }

    @Test func aSilentPath_anOverloadedServer_andAUsersReconnect_areNot() {
        #expect(lost { _ = $0.heartbeatTimedOut($1, now: at(5)) } == .pathSilent)
        #expect(lost { _ = $0.goaway($1, code: .overloaded, retryAfter: nil, redirect: nil, now: at(5)) } == .serverOverloaded)
        #expect(lost { machine, _ in _ = machine.userReconnect(now: at(5)) } == nil)
        #expect(lost { machine, _ in _ = machine.userDisconnect(now: at(5)) } == nil)
    }

    /// The daemon's own drop (a store failure) is classed as a refusal for the backoff, so the
    /// session service tells the sessions itself that such a loss is no message's doing.
    @Test func theDaemonsOwnStoreFailure_isClassedServerRefusing_forTheBackoffOnly() {
        #expect(lost { _ = $0.localFailure($1, reason: "disk full", now: at(5)) } == .serverRefusing)
    }
}
