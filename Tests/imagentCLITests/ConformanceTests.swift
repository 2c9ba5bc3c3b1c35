import Foundation
import IMAgentTestKit
import Testing

/// The client conformance suite (issue 25, clients/conformance/README.md): every client library's
/// driver runs each scenario against a real `imagentd` and `imagent-refserver`, one new pair per
/// scenario; the harness causes the faults and checks the driver's report. A driver that is not
/// built fails its tests; clients/conformance/README.md says what is checked. One at a time: the
/// 10,000-message streams and the 1,000 sessions are load enough on their own (scripts/test runs
/// the suite apart, after the main step, with the load tests).
@Suite(.serialized, .timeLimit(.minutes(5)))
struct ConformanceTests {
    static let nobody: UInt32 = 65534

    @Test(arguments: ClientLibrary.allCases)
    func echo(_ library: ClientLibrary) async throws {
        try requireDriver(library)
        try await withConformanceCluster(library, "echo") { cluster in
            try await cluster.startServer()
            try await cluster.startDaemon()
            for size in [64, 1024] {
                let run = try await cluster.run(library, "echo", ["--messages", "200", "--size", "\(size)"])
                expectStream(run, library, "echo \(size) B", messages: 200, cluster)
            }
        }
    }

    @Test(arguments: ClientLibrary.allCases)
    func queueFull(_ library: ClientLibrary) async throws {
        try requireDriver(library)
        try await withConformanceCluster(library, "queue-full", extraConfig: "[limits]\noutbox_messages = 20\n") { cluster in
            try await cluster.startDaemon()  // the server is down
            var full: Int?
            let run = try await cluster.run(library, "queue-full", ["--messages", "100"]) { event in
                guard event["event"] as? String == "queue_full", full == nil else { return }
                full = (event["accepted"] as? NSNumber)?.intValue ?? -1
                try await cluster.startServer()
            }
            #expect(full == 20, "\(library): queue_full event with accepted \(full.map(String.init) ?? "none"), expected 20")
            #expect(run.int("accepted_before_full") == 20, "\(library): \(run.diagnosis)")
            expectStream(run, library, "queue-full", messages: 100, cluster, allowedErrors: ["QUEUE_FULL"])
        }
    }

    @Test(arguments: ClientLibrary.allCases)
    func large(_ library: ClientLibrary) async throws {
        try requireDriver(library)
        // 1 MiB payloads (the daemon's MAX_PAYLOAD) need frames above 1 MiB on the link, both ways.
        try await withConformanceCluster(library, "large", maxFrame: 2 << 20) { cluster in
            try await cluster.startServer()
            try await cluster.startDaemon()
            let run = try await cluster.run(library, "large", ["--messages", "4", "--size", "1048576"])
            expectStream(run, library, "large", messages: 4, cluster, allowedErrors: ["PAYLOAD_TOO_LARGE"])
            #expect(run.string("too_large") == "PAYLOAD_TOO_LARGE", "\(library): \(run.diagnosis)")
        }
    }

    @Test(arguments: ClientLibrary.allCases)
    func sessions(_ library: ClientLibrary) async throws {
        try requireDriver(library)
        let count = 1000
        try await withConformanceCluster(library, "sessions", extraConfig: "[limits]\nmax_sessions_per_uid = \(2 * count)\n") { cluster in
            try await cluster.startServer()
            try await cluster.startDaemon()
            let run = try await cluster.run(library, "sessions", ["--sessions", "\(count)"])
            print("conformance \(library) sessions: opened \(run.int("opened") ?? -1), echoed \(run.int("received") ?? -1) "
                  + "in \(String(format: "%.1f", run.seconds)) s, wrong \(run.int("wrong") ?? -1), errors \(run.errors)")
            #expect(run.status == 0 && !run.signaled, "\(library): \(run.diagnosis)")
            for key in ["opened", "sent", "received"] {
                #expect(run.int(key) == count, "\(library): \(key) \(run.int(key) ?? -1) of \(count); \(run.diagnosis)")
            }
            #expect(run.int("wrong") == 0, "\(library): \(run.diagnosis)")
            #expect(run.report?["errors"] is [String: Any] && run.errors.isEmpty, "\(library): \(run.diagnosis)")
        }
    }

    @Test(.enabled(if: getuid() == 0 && access("/usr/bin/setpriv", X_OK) == 0, "needs root and setpriv(1) to run a driver as another uid"),
          arguments: ClientLibrary.allCases)
    func permissionDenied(_ library: ClientLibrary) async throws {
        try requireDriver(library)
        try await withConformanceCluster(library, "other uid", socketMode: "0666") { cluster in
            try await cluster.startServer()
            try await cluster.startDaemon()
            // The folder is 0700 (the daemon keeps its store there): let other users through to the socket.
            #expect(chmod(cluster.directory, 0o711) == 0)
            let opened = try await cluster.run(library, "open", ["--timeout-ms", "20000"], limit: .seconds(30))
            let session = try #require(opened.uint64("session"), "\(library): open gave no session; \(opened.diagnosis)")
            // setpriv's change of uid clears the parent-death signal: this driver is bounded by its own limits alone.
            let run = try await cluster.run(library, "attach", ["--session", "\(session)", "--timeout-ms", "20000"],
                                            asUID: Self.nobody, limit: .seconds(30))
            print("conformance \(library) other uid, session \(session): attach \(run.string("attach") ?? "?"), send \(run.string("send") ?? "?"), "
                  + "close \(run.string("close") ?? "?")")
            #expect(run.status == 0 && !run.signaled, "\(library): \(run.diagnosis)")
            for step in ["attach", "send", "close"] {
                #expect(run.string(step) == "PERMISSION_DENIED", "\(library): \(step); \(run.diagnosis)")
            }
            // The other uid does reach the daemon: otherwise the refusals above would prove nothing.
            let own = try await cluster.run(library, "open", ["--timeout-ms", "20000"], asUID: Self.nobody, limit: .seconds(30))
            #expect(own.uint64("session") != nil, "\(library): uid \(Self.nobody) cannot open a session of its own; \(own.diagnosis)")
        }
    }

    @Test(arguments: ClientLibrary.allCases)
    func serverDown(_ library: ClientLibrary) async throws {
        try requireDriver(library)
        try await withConformanceCluster(library, "server-down") { cluster in
            try await cluster.startDaemon()  // the server is down
            var accepted: Int?
            let run = try await cluster.run(library, "server-down", ["--messages", "200"]) { event in
                guard event["event"] as? String == "accepted", accepted == nil else { return }
                accepted = (event["count"] as? NSNumber)?.intValue ?? -1
                try await cluster.startServer()
            }
            #expect(accepted == 200, "\(library): accepted event with count \(accepted.map(String.init) ?? "none"), expected 200")
            expectStream(run, library, "server-down", messages: 200, cluster)
        }
    }

    @Test(arguments: ClientLibrary.allCases)
    func stream(_ library: ClientLibrary) async throws {
        try requireDriver(library)
        let messages = 10_000
        try await withConformanceCluster(library, "stream") { cluster in
            try await cluster.startServer()
            try await cluster.startDaemon()
            var killedAt: Int?
            let run = try await cluster.run(library, "stream", ["--messages", "\(messages)"]) { event in
                guard event["event"] as? String == "progress", killedAt == nil,
                      let received = (event["received"] as? NSNumber)?.intValue, received >= messages / 3 else { return }
                killedAt = received
                await cluster.killDaemon()
                try await Task.sleep(for: .milliseconds(300))
                try await cluster.startDaemon()
            }
            #expect(killedAt != nil, "\(library): no progress event reached \(messages / 3) received; the daemon was never killed")
            print("conformance \(library) stream: daemon killed -9 at \(killedAt.map(String.init) ?? "-") received")
            expectStream(run, library, "stream", messages: messages, cluster, allowedErrors: nil)
        }
    }

    // MARK: Checks

    private func requireDriver(_ library: ClientLibrary) throws {
        try #require(library.missing == nil, "the \(library) driver: \(library.missing ?? "")")
    }

    /// The stream report of clients/conformance/README.md: every message sent and echoed once, in order.
    /// `allowedErrors`: the error names the scenario may report (nil: any, for the kill -9 stream).
    private func expectStream(_ run: DriverRun, _ library: ClientLibrary, _ name: String, messages: Int, _ cluster: ConformanceCluster,
                              allowedErrors: Set<String>? = [], sourceLocation: SourceLocation = #_sourceLocation) {
        let received = run.int("received") ?? -1
        print("conformance \(library) \(name): sent \(run.int("sent") ?? -1), received \(received) in "
              + "\(String(format: "%.2f", run.seconds)) s (\(Int(Double(max(received, 0)) / max(run.seconds, 0.001))) msg/s), "
              + "duplicates \(run.int("duplicates") ?? -1), gaps \(run.int("gaps") ?? -1), corrupt \(run.int("corrupt") ?? -1), "
              + "errors \(run.errors), exit \(run.status)")
        let context = "\(library) \(name): \(run.diagnosis)\nimagentd.log ends with:\n\(tailOfFile(cluster.directory + "/imagentd.log", bytes: 1500))"
        #expect(run.status == 0 && !run.signaled, "\(context)", sourceLocation: sourceLocation)
        #expect(run.report?["errors"] is [String: Any], "no errors object: \(context)", sourceLocation: sourceLocation)
        #expect(run.int("sent") == messages, "\(context)", sourceLocation: sourceLocation)
        #expect(received == messages, "\(context)", sourceLocation: sourceLocation)
        #expect(run.bool("seqs_in_order") == true, "\(context)", sourceLocation: sourceLocation)
        for key in ["duplicates", "gaps", "corrupt"] {
            #expect(run.int(key) == 0, "\(key): \(context)", sourceLocation: sourceLocation)
        }
        if let allowedErrors {
            #expect(Set(run.errors.keys).isSubset(of: allowedErrors), "errors: \(context)", sourceLocation: sourceLocation)
        }
    }
}
