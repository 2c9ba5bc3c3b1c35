import AgentIPC
import Foundation
import NIOConcurrencyHelpers

/// Polls the daemon's STATUS over its socket every `interval` and keeps the
/// latest answer, reconnecting whenever the daemon goes away. The daemon
/// stamps `connected_since_ms` itself, so reconnect times do not depend on
/// how often this polls; the poll only has to see the new state.
final class LinkMonitor: Sendable {
    struct Sample: Sendable {
        /// When this answer arrived (Unix ms).
        var atMS: Int64
        var state: String
        var connectedSinceMS: Int64?
        var reconnects: Int
        var daemonPID: Int
        var lastError: String?
    }

    private let socketPath: String
    private let interval: Duration
    private let latestSample = NIOLockedValueBox<Sample?>(nil)
    private let task = NIOLockedValueBox<Task<Void, Never>?>(nil)

    init(socketPath: String, interval: Duration = .milliseconds(20)) {
        self.socketPath = socketPath
        self.interval = interval
    }

    var latest: Sample? { latestSample.withLockedValue { $0 } }

    func start() {
        let poller = Task { [self] in await poll() }
        task.withLockedValue { $0 = poller }
    }

    func stop() {
        task.withLockedValue { $0?.cancel() }
    }

    /// The first sample taken at or after `afterMS` that shows the link connected, within `seconds`.
    func waitConnected(after afterMS: Int64, seconds: Double) async -> Sample? {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if let sample = latest, sample.atMS >= afterMS, sample.state == "connected" { return sample }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return nil
    }

    /// The first sample taken at or after `afterMS` that shows a link
    /// connected since after `sinceMS` (a new one: the daemon replaced or
    /// re-made it), within `seconds`; nil when the old link stayed up.
    func waitNewLink(after afterMS: Int64, since sinceMS: Int64, seconds: Double) async -> Sample? {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if let sample = latest, sample.atMS >= afterMS, sample.state == "connected",
                let since = sample.connectedSinceMS, since > sinceMS {
                return sample
            }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return nil
    }

    /// The first sample taken at or after `afterMS` that shows the link not connected, within `seconds`.
    func waitNotConnected(after afterMS: Int64, seconds: Double) async -> Sample? {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if let sample = latest, sample.atMS >= afterMS, sample.state != "connected" { return sample }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return nil
    }

    private func poll() async {
        while !Task.isCancelled {
            guard let client = try? await IPCClient.connect(socketPath: socketPath, clientName: "imagent-chaos monitor",
                                                             timeout: .seconds(2)) else {
                try? await Task.sleep(for: interval)
                continue
            }
            while !Task.isCancelled {
                guard let text = try? await client.status() else { break }
                if let sample = Self.parse(text) { latestSample.withLockedValue { $0 = sample } }
                try? await Task.sleep(for: interval)
            }
            await client.close()
        }
    }

    private static func parse(_ text: String) -> Sample? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
              let link = object["link"] as? [String: Any], let state = link["state"] as? String else { return nil }
        let daemon = object["daemon"] as? [String: Any]
        return Sample(atMS: wallMS(), state: state,
                      connectedSinceMS: (link["connected_since_ms"] as? NSNumber)?.int64Value,
                      reconnects: (link["reconnects"] as? NSNumber)?.intValue ?? 0,
                      daemonPID: (daemon?["pid"] as? NSNumber)?.intValue ?? 0,
                      lastError: link["last_error"] as? String)
    }
}
