import Foundation
import Logging
import NIOCore
import NIOPosix
import RefServer

/// A temporary directory with a token file, removed when the test ends.
struct TestEnvironment: Sendable {
    static let token = "secret-token"

    let directory: String
    var tokenFile: String { directory + "/tokens" }
    var statePath: String { directory + "/state.sqlite" }
    var adminSocket: String { directory + "/admin.sock" }

    static func make() throws -> TestEnvironment {
        // Unix socket paths are limited to 107 bytes: keep the directory short.
        let directory = "/tmp/refsrv-" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let environment = TestEnvironment(directory: directory)
        try environment.writeTokens([token])
        return environment
    }

    func writeTokens(_ tokens: [String]) throws {
        try (tokens.joined(separator: "\n") + "\n").write(toFile: tokenFile, atomically: true, encoding: .utf8)
    }

    /// A new empty file in the directory, for a child process's output.
    func emptyFile(_ name: String) -> URL {
        let path = directory + "/" + name
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        return URL(fileURLWithPath: path)
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    func configuration() -> RefServerConfiguration {
        RefServerConfiguration(host: "127.0.0.1", port: 0, tokenFile: tokenFile, push: .init(count: 0, size: 16, rate: 0))
    }
}

/// Runs `body` under a deadline; the test fails with `TestTimeout` if it runs over.
func withTimeout<T: Sendable>(_ limit: Duration, _ what: String = "the test body",
                              _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: limit)
            throw TestTimeout(what: "\(what) (limit \(limit))")
        }
        defer { group.cancelAll() }
        return try await group.next()!
    }
}

/// Starts a server in-process on 127.0.0.1, port 0, runs `body`, stops the
/// server and removes its files, all within `limit`.
func withRefServer<T: Sendable>(
    limit: Duration = .seconds(30),
    group: EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
    environment: TestEnvironment? = nil,
    configure: @Sendable (inout RefServerConfiguration, TestEnvironment) -> Void = { _, _ in },
    _ body: @escaping @Sendable (RefServer, TestEnvironment) async throws -> T
) async throws -> T {
    // A caller's environment outlives this server (a restart test), so only ours is removed.
    let owned = environment == nil
    let environment = try environment ?? TestEnvironment.make()
    var configuration = environment.configuration()
    configure(&configuration, environment)
    var logger = Logger(label: "test.refserver")
    logger.logLevel = .warning
    let server = try await RefServer.start(configuration: configuration, group: group, logger: logger)
    do {
        let result = try await withTimeout(limit) { try await body(server, environment) }
        try await server.stop()
        if owned { environment.remove() }
        return result
    } catch {
        try? await server.stop()
        if owned { environment.remove() }
        throw error
    }
}
