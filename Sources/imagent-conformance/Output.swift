import AgentIPC
import JSONText
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Standard output: one JSON object a line, each flushed at once (the harness acts on events as they come).
enum Output {
    private static let lock = Mutex(())

    static func line(_ build: (inout JSONWriter) -> Void) {
        var json = JSONWriter()
        json.beginObject()
        build(&json)
        json.endObject()
        lock.withLock { _ in
            print(json.text)
            fflush(nil)
        }
    }

    static func event(_ name: String, _ build: (inout JSONWriter) -> Void) {
        line { json in
            json.field("event", name)
            build(&json)
        }
    }

    /// Free text for a person reading the harness's log: standard error.
    static func note(_ text: String) {
        var bytes = Array("imagent-conformance: \(text)\n".utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
            if written < 0, errno == EINTR { continue }
            guard written > 0 else { return }
            bytes = bytes.dropFirst(written)
        }
    }
}

/// Error name → how many times the library reported it.
struct ErrorCounts {
    private(set) var counts: [String: Int] = [:]

    mutating func count(_ name: String) { counts[name, default: 0] += 1 }

    func write(to json: inout JSONWriter) {
        json.beginObject("errors")
        for name in counts.keys.sorted() { json.field(name, counts[name]!) }
        json.endObject()
    }
}

/// An error's name as imagent-ipc(7) names the codes, plus DAEMON_UNAVAILABLE and TIMED_OUT.
func errorName(_ error: any Error) -> String {
    switch error {
    case IPCClientError.refused(_, let code, _): "\(code)"
    case IPCClientError.payloadTooLarge: "PAYLOAD_TOO_LARGE"
    case IPCClientError.timedOut, is Deadline: "TIMED_OUT"
    case IPCClientError.permissionDenied: "PERMISSION_DENIED"
    case IPCClientError.versionUnsupported: "VERSION_UNSUPPORTED"
    case IPCClientError.protocolViolation, IPCClientError.unexpectedReply: "PROTOCOL_VIOLATION"
    case IPCClientError.daemonNotRunning, IPCClientError.daemonNotListening, IPCClientError.connectFailed,
         IPCClientError.connectionLost, IPCClientError.closed: "DAEMON_UNAVAILABLE"
    default: "\(error)"
    }
}

/// The error an event reports (a message given up, a session failed or closed, an ERROR), if any.
func errorName(of event: IPCEvent) -> String? {
    switch event {
    case .expired(let expired): "\(expired.code)"
    case .error(let reply): "\(reply.code)"
    case .sessionState(let change) where change.state == .failed || change.state == .closed:
        change.code.map { "\($0)" } ?? "SESSION_\(change.state)".uppercased()
    case .message, .acked, .sessionState, .linkState, .watch: nil
    }
}

/// The connection was lost: a program connects again, the daemon's store has kept everything.
func isConnectionLoss(_ error: any Error) -> Bool {
    errorName(error) == "DAEMON_UNAVAILABLE"
}

/// The scenario's `--timeout-ms` has passed.
struct Deadline: Error {}
