import AgentStore
import Glibc
import IMAgentTestKit
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing
@testable import IMAgentCore

/// The daemon's loop keeps running while the store commits a lone request
/// (`SQLiteSessionPersistence.linger`), on the real store in a scratch directory.
@Suite("The loop lingers for a lone commit", .serialized, .timeLimit(.minutes(2)))
struct LoopLingerTests {
    @Test func aLoneRequest_startsALinger_thatEndsWithItsCompletion() async throws {
        try await withPersistence(lingerTime: .seconds(120)) { persistence, loop, completed in
            let lingered = try await loneCreateStartsALinger(persistence, loop, completed)
            #expect(lingered)
            // Well inside the 120 s: the linger ends with the last completion, not with its time.
            try await waitUntil("the linger ends") { try await loop.submit { !persistence.isLingering }.get() }
        }
    }

    @Test func aTurnWithMoreThanALoneRequest_doesNotLinger() async throws {
        try await withPersistence(lingerTime: .seconds(120)) { persistence, loop, completed in
            let count = SQLiteSessionPersistence.lingerAtMost + 1
            try await loop.submit {
                for id in 1...count { persistence.submit(Self.create(UInt64(id)), tag: UInt64(id)) }
            }.get()
            // Runs after the turn's check, which found more than a lone request in flight.
            let lingering = try await loop.submit { persistence.isLingering }.get()
            #expect(!lingering)
            try await waitUntil("every create completes") { completed.withLockedValue { $0.count } == count }
        }
    }

    @Test func aLingerThatFindsTheLoopBusy_holdsOffTheNextOne() async throws {
        try await withPersistence(lingerTime: .seconds(120), quietAfterBusy: .seconds(120)) { persistence, loop, completed in
            try await loop.submit {
                persistence.submit(Self.create(1), tag: 1)
                // Queued behind the linger's first look: the next look comes 2 ms late.
                loop.execute { usleep(2_000) }
            }.get()
            try await waitUntil("the create completes") { completed.withLockedValue { $0 } == [1] }
            try await waitUntil("the linger ends") { try await loop.submit { !persistence.isLingering }.get() }
            try await loop.submit { persistence.submit(Self.create(2), tag: 2) }.get()
            let lingering = try await loop.submit { persistence.isLingering }.get()
            #expect(!lingering, "a lone request within the quiet time after a busy linger")
            try await waitUntil("the second create completes") { completed.withLockedValue { $0 } == [1, 2] }
        }
    }

    /// At `power` the fsync outlasts a linger worth having: by default the loop sleeps.
    @Test func atPower_theLoopDoesNotLingerByDefault() async throws {
        try await withPersistence(durability: .power, lingerTime: nil) { persistence, loop, completed in
            let lingered = try await loneCreateStartsALinger(persistence, loop, completed)
            #expect(!lingered)
        }
        #expect(SQLiteSessionPersistence.defaultLingerTime(.process) == .microseconds(300))
    }

    @Test func noLingerTime_neverLingers() async throws {
        try await withPersistence(lingerTime: .zero) { persistence, loop, completed in
            let lingered = try await loneCreateStartsALinger(persistence, loop, completed)
            #expect(!lingered)
        }
    }

    /// Submits one create on the loop; whether that started a linger, once the create completed.
    func loneCreateStartsALinger(_ persistence: SQLiteSessionPersistence, _ loop: EventLoop,
                                 _ completed: NIOLockedValueBox<[UInt64]>) async throws -> Bool {
        let lingering = try await loop.submit {
            persistence.submit(Self.create(1), tag: 1)
            return persistence.isLingering
        }.get()
        try await waitUntil("the create completes") { completed.withLockedValue { $0 } == [1] }
        return lingering
    }

    static func create(_ id: UInt64) -> StoreOperation {
        .createSession(id: id, service: "echo", ownerUID: 1000, priority: 1, durable: true, createdAtMS: 0)
    }

    /// The store opened on a loop of its own; `body` gets it, the loop and the tags completed so far.
    func withPersistence(
        durability: DaemonConfiguration.Durability = .process, lingerTime: TimeAmount?,
        quietAfterBusy: TimeAmount = SQLiteSessionPersistence.defaultQuietAfterBusy,
        _ body: (SQLiteSessionPersistence, EventLoop, NIOLockedValueBox<[UInt64]>) async throws -> Void
    ) async throws {
        let scratch = try ScratchDirectory("looplinger")
        defer { scratch.cleanup() }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        do {
            let loop = group.next()
            let persistence = try await SQLiteSessionPersistence.open(directory: scratch.path, durability: durability, on: loop,
                                                                      lingerTime: lingerTime, quietAfterBusy: quietAfterBusy).get()
            let completed = NIOLockedValueBox<[UInt64]>([])
            try await loop.submit {
                persistence.deliverOutcomes { outcomes in
                    completed.withLockedValue { $0 += outcomes.filter { (try? $0.result.get()) != nil }.map(\.tag) }
                }
            }.get()
            try await body(persistence, loop, completed)
            try await persistence.close().get()
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
        try await group.shutdownGracefully()
    }

    func waitUntil(_ what: String, _ condition: () async throws -> Bool) async throws {
        let met = try await poll(within: .seconds(30), every: .milliseconds(10)) { try await condition() ? true : nil }
        if met == nil { Issue.record("\(what): not within 30 s") }
    }
}
