import Foundation
import IMAgentTestKit
import IMLink
import Logging
import NIOCore
import NIOPosix
import RefServer
import Synchronization
import Testing

@testable import IMAgentCore

/// A scratch directory, removed by `cleanup()`.
struct ScratchDirectory {
    let path: String

    init(_ name: String = "linktest") throws {
        path = try makeTemporaryDirectory(prefix: "imagent-\(name)")
    }

    func write(_ name: String, _ text: String) throws -> String {
        let file = path + "/" + name
        try text.write(toFile: file, atomically: true, encoding: .utf8)
        return file
    }

    func cleanup() { removeTree(path) }
}

/// Seconds on the monotonic clock, for measurements printed by the tests.
func nowSeconds() -> Double {
    Double(monotonicNanoseconds()) / 1e9
}

/// Every transition of one engine, time-stamped, for waiting and asserting.
final class TransitionRecorder: Sendable {
    struct Entry: Sendable {
        var at: Double
        var transition: LinkTransition
    }

    private let entries = Mutex<[Entry]>([])

    func record(_ transition: LinkTransition) {
        let entry = Entry(at: nowSeconds(), transition: transition)
        entries.withLock { $0.append(entry) }
        print("  [\(String(format: "%.3f", entry.at))] \(transition.to) — \(transition.reason)")
    }

    var all: [Entry] { entries.withLock { $0 } }

    /// Waits until an entry after index `from` satisfies `predicate`.
    @discardableResult
    func waitFor(
        after from: Int = 0,
        timeout: Double,
        _ what: String,
        _ predicate: @escaping (LinkTransition) -> Bool
    ) async throws -> Entry {
        let found = try await poll(within: .seconds(timeout), every: .milliseconds(10)) {
            entries.withLock { list in list.dropFirst(from).first { predicate($0.transition) } }
        }
        if let found { return found }
        Issue.record("timed out after \(timeout) s waiting for \(what)")
        throw HarnessError.timeout(what)
    }

    var count: Int { entries.withLock { $0.count } }
}

enum HarnessError: Error {
    case timeout(String)
    case setupFailed(String)
}

extension LinkTransition {
    var isConnected: Bool { to.isConnected }
    var connectedEndpoint: Endpoint? {
        if case .connected(let endpoint) = to { return endpoint }
        return nil
    }
    var leftConnected: Bool { from.isConnected && !to.isConnected }
    /// When the backoff this transition armed ends (monotonic seconds, the recorder's clock).
    var backoffDeadline: Double? {
        if case .waitingToReconnect(let until) = to { return until.sinceOrigin / .seconds(1) }
        return nil
    }
    var isAttemptStart: Bool {
        if case .connecting(.token, _) = to { return true }
        return false
    }
}

/// The configuration tests start from: tiny bounds so everything runs in seconds.
func testLinkConfiguration(endpoints: [String], tokenFile: String) -> LinkConfiguration {
    var configuration = LinkConfiguration(endpoints: endpoints, token: .file(tokenFile), agentID: "test-agent-\(getpid())")
    configuration.heartbeatMin = .seconds(1)
    configuration.heartbeatMax = .seconds(2)
    configuration.heartbeatProbeStep = .milliseconds(250)
    configuration.reconnectBase = .milliseconds(200)
    configuration.reconnectCap = .seconds(1)
    configuration.reconnectHerdSpread = .milliseconds(400)
    configuration.stageTimeout = .seconds(3)
    configuration.watchNetwork = false
    return configuration
}

func testLogger(_ label: String) -> Logger {
    var logger = Logger(label: label)
    logger.logLevel = ProcessInfo.processInfo.environment["LINK_TEST_LOG"] == nil ? .critical : .debug
    return logger
}

/// An engine with a recorder attached, started (on `eventLoop`, by default one of the shared group's).
func startEngine(_ configuration: LinkConfiguration,
                 on eventLoop: EventLoop = MultiThreadedEventLoopGroup.singleton.next()) throws -> (LinkEngine, TransitionRecorder) {
    let engine = try LinkEngine(configuration: configuration, eventLoop: eventLoop, logger: testLogger("link-test"))
    let recorder = TransitionRecorder()
    engine.onTransition { recorder.record($0) }
    engine.start()
    return (engine, recorder)
}

/// Runs `body` with a started engine and its recorder, and shuts the engine down however `body`
/// ends: a failed wait must not leave an engine retrying its server behind, into later tests.
/// (A second `shutdown()`, after one in `body`, does nothing.)
func withEngine<Result>(_ configuration: LinkConfiguration,
                        on eventLoop: EventLoop = MultiThreadedEventLoopGroup.singleton.next(),
                        _ body: (LinkEngine, TransitionRecorder) async throws -> Result) async throws -> Result {
    let (engine, recorder) = try startEngine(configuration, on: eventLoop)
    do {
        let result = try await body(engine, recorder)
        await engine.shutdown()
        return result
    } catch {
        await engine.shutdown()
        throw error
    }
}

/// A reference server (token `secret-1`) and an engine configured for it and started: the
/// set-up most engine tests share. The engine, then the server, stop however `body` ends.
func withServedEngine(heartbeatMS: UInt32 = 30_000,
                      _ body: (RefServer, LinkEngine, TransitionRecorder) async throws -> Void) async throws {
    let scratch = try ScratchDirectory()
    defer { scratch.cleanup() }
    let tokens = try scratch.write("tokens", "secret-1\n")
    let server = try await startServer(tokenFile: tokens, heartbeatMS: heartbeatMS)
    do {
        try await withEngine(testLinkConfiguration(endpoints: [server.address], tokenFile: tokens)) { engine, recorder in
            try await body(server, engine, recorder)
        }
    } catch {
        try? await server.stop()
        throw error
    }
    try await server.stop()
}

/// A reference server in this process.
func startServer(
    tokenFile: String,
    host: String = "127.0.0.1",
    port: Int = 0,
    heartbeatMS: UInt32 = 30_000,
    tls: RefServerConfiguration.TLS? = nil
) async throws -> RefServer {
    try await RefServer.start(
        configuration: RefServerConfiguration(host: host, port: port, tokenFile: tokenFile, heartbeatMS: heartbeatMS, tls: tls),
        logger: testLogger("refserver")
    )
}

/// A port on 127.0.0.1 that never answers a SYN: a listener with a backlog
/// of 0 whose one queue slot is taken by a connection nobody accepts, so the
/// kernel drops every further SYN and a connect hangs until its timeout —
/// a black hole without a network namespace.
final class SilentPort {
    let port: Int
    private let listener: Int32
    private let filler: Int32

    init() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        let filler = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ready = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, length) == 0 && listen(listener, 0) == 0
                    && getsockname(listener, $0, &length) == 0 && connect(filler, $0, length) == 0
            }
        }
        guard ready else {
            let code = errno
            Glibc.close(listener)
            Glibc.close(filler)
            throw HarnessError.setupFailed("a silent port: errno \(code)")
        }
        self.listener = listener
        self.filler = filler
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    func close() {
        Glibc.close(filler)
        Glibc.close(listener)
    }
}

/// Runs a command (the kit's `runShell`), returns its exit status; its output goes to the test log unless `quiet`.
@discardableResult
func shell(_ command: String, quiet: Bool = false) -> Int32 {
    let result = runShell(command)
    if !quiet, !result.output.isEmpty { print(result.output, terminator: "") }
    return result.status
}
