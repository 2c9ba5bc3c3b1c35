#if canImport(Glibc)
import Glibc
#endif
import AgentStore
import IMAgentTestKit
import NIOCore
import NIOPosix

/// `imagent-bench store`: the store's group commit and load, through its public
/// API in this process (no daemon). Figures for BENCHMARKS.md; a run whose
/// store does not hold what was appended fails (exit 1).
struct StoreBenchOptions {
    var durabilities: [Durability] = Durability.allCases
    var sizes = [64, 1024]
    var loadMessages = 100_000
}

func runStoreBench(_ options: StoreBenchOptions) async -> Int32 {
    #if DEBUG
    let build = "debug build"
    #else
    let build = "release build"
    #endif
    var table = MarkdownTable([.text("durability"), .number("payload"), .number("one at a time msg/s"),
                               .number("64 in flight msg/s (msg/commit)"), .number("all at once msg/s (msg/commit)")])
    do {
        for durability in options.durabilities {
            for size in options.sizes {
                var cells = [durability.rawValue, sizeLabel(size)]
                for (label, window, count) in [("one at a time", 1, 500), ("64 in flight", 64, 20_000), ("all at once", 20_000, 20_000)] {
                    let (seconds, commits) = try await measureAppends(durability: durability, size: size, window: window, count: count)
                    let perCommit = window == 1 ? "" : " (\(grouped(Int((Double(count) / Double(commits)).rounded()))))"
                    cells.append(grouped(Int(Double(count) / seconds)) + perCommit)
                    print("append \(durability) \(size) B, \(label): \(grouped(count)) messages in \(format(seconds * 1000, decimals: 1)) ms"
                        + " = \(grouped(Int(Double(count) / seconds))) messages/s, \(commits) commits"
                        + " = \(grouped(Int(Double(commits) / seconds))) commits/s, \(format(Double(count) / Double(commits), decimals: 1)) messages/commit"
                        + " [\(build)]")
                }
                table.add(cells)
            }
        }
        if options.loadMessages > 0 { try await measureLoad(messages: options.loadMessages, build: build) }
        await printMarkdown(table)
        return 0
    } catch {
        print("imagent-bench store: \(error)")
        return 1
    }
}

private let storeLoop: EventLoop = MultiThreadedEventLoopGroup.singleton.next()

private func payload(size: Int) -> ByteBuffer {
    var buffer = ByteBuffer()
    buffer.reserveCapacity(size)
    for index in 0..<size { buffer.writeInteger(UInt8(truncatingIfNeeded: index)) }
    return buffer
}

/// `count` appends of `size` bytes to one session, `window` of them in flight; the seconds and the commits they took.
private func measureAppends(durability: Durability, size: Int, window: Int, count: Int) async throws -> (Double, Int) {
    let directory = try makeTemporaryDirectory(prefix: "imagent-bench-store")
    defer { removeTree(directory) }
    let store = try await AgentStore.open(StoreConfiguration(path: directory + "/store.sqlite", durability: durability), on: storeLoop).get()
    do {
        let session = try await store.createSession(service: "echo", ownerUID: 1000, createdAtMS: 1_700_000_000_000, on: storeLoop).get()
        let before = store.statistics.commits
        let start = ContinuousClock.now
        try await WindowedAppender(store: store, session: session.id, payload: payload(size: size), count: UInt64(count))
            .run(window: window).get()
        let seconds = (ContinuousClock.now - start) / .seconds(1)
        let commits = Int(store.statistics.commits - before)
        let sent = try await store.session(session.id, on: storeLoop).get()?.sentSeq
        guard sent == UInt64(count) else { throw BenchError("the store holds SENT_SEQ \(sent ?? 0) after \(count) appends") }
        try await store.close(on: storeLoop).get()
        return (seconds, commits)
    } catch {
        try? await store.close(on: storeLoop).get()
        throw error
    }
}

/// Queues `messages` 1 KiB messages in ten sessions, then times opening the store and loading it.
private func measureLoad(messages count: Int, build: String) async throws {
    let directory = try makeTemporaryDirectory(prefix: "imagent-bench-store")
    defer { removeTree(directory) }
    let path = directory + "/store.sqlite"
    let perSession = max(1, count / 10)
    let filler = try await AgentStore.open(StoreConfiguration(path: path), on: storeLoop).get()
    let bytes = payload(size: 1024)
    for _ in 0..<10 {
        let session = try await filler.createSession(service: "echo", ownerUID: 1000, createdAtMS: 1_700_000_000_000, on: storeLoop).get()
        for chunk in stride(from: 1, through: perSession, by: 1000) {
            _ = try await filler.perform((chunk..<min(chunk + 1000, perSession + 1)).map {
                .appendOutbound(session: session.id, seq: UInt64($0), payload: bytes, expiresAtMS: nil)
            }, on: storeLoop).get()
        }
    }
    try await filler.close(on: storeLoop).get()
    var information = stat()
    let fileBytes = stat(path, &information) == 0 ? Int(information.st_size) : 0

    let start = ContinuousClock.now
    let store = try await AgentStore.open(StoreConfiguration(path: path), on: storeLoop).get()
    let opened = ContinuousClock.now
    let snapshot = try await store.load(on: storeLoop).get()
    let loaded = ContinuousClock.now
    try await store.close(on: storeLoop).get()
    let queued = snapshot.sessions.reduce(0) { $0 + $1.outbox.count }
    guard queued == perSession * 10, snapshot.sessions.allSatisfy({ $0.outbox.last?.payload.readableBytes == 1024 }) else {
        throw BenchError("the store loaded \(queued) messages of the \(perSession * 10) queued")
    }
    print("load: \(grouped(queued)) queued 1 KiB messages in \(snapshot.sessions.count) sessions loaded in "
        + "\(format((loaded - opened) / .milliseconds(1), decimals: 1)) ms (open and migrate check "
        + "\(format((opened - start) / .milliseconds(1), decimals: 1)) ms; database \(fileBytes / 1_048_576) MiB) [\(build)]")
}

/// Keeps `window` appends in flight on the loop — like that many clients each
/// waiting for ACCEPTED before sending the next — until `count` have committed.
/// Touched only on `storeLoop`, hence `@unchecked Sendable`.
private final class WindowedAppender: @unchecked Sendable {
    let store: AgentStore
    let session: UInt64
    let payload: ByteBuffer
    let count: UInt64
    private var next: UInt64 = 1
    private var committed: UInt64 = 0
    private let finished: EventLoopPromise<Void>

    init(store: AgentStore, session: UInt64, payload: ByteBuffer, count: UInt64) {
        self.store = store
        self.session = session
        self.payload = payload
        self.count = count
        self.finished = storeLoop.makePromise()
    }

    func run(window: Int) -> EventLoopFuture<Void> {
        storeLoop.execute {
            for _ in 0..<window { self.submitNext() }
        }
        return finished.futureResult
    }

    private func submitNext() {
        guard next <= count else { return }
        let seq = next
        next += 1
        store.appendOutbound(session: session, seq: seq, payload: payload, on: storeLoop).whenComplete { result in
            switch result {
            case .success:
                self.committed += 1
                if self.committed == self.count { self.finished.succeed(()) } else { self.submitNext() }
            case .failure(let error):
                self.finished.fail(error)
            }
        }
    }
}
