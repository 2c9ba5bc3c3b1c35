import AgentIPC
import Foundation
import NIOCore
import Synchronization
import Testing

/// Issue 26's acceptance: every byte the daemon holds for a client is counted. With the
/// server down, one client pipelines 1,000 SENDs of about 1 MiB without waiting for
/// ACCEPTED while another asks for STATUS over and over and never reads a reply. The
/// daemon's anonymous memory (`RssAnon`) stays at most 64 MiB: the first client's socket is
/// no longer read while its SENDs wait for the store, and the second's replies are bounded.
/// Then the server comes back and every message is echoed exactly once, in order. Real
/// processes: `imagentd`, `imagent-refserver`, `imagent-loadgen`.
@Suite(.serialized)
struct ClientMemoryTests {
    static let messages = 1_000
    /// 1 MiB less 1 KiB, so that a DATA frame with its header fits the reference server's
    /// MAX_FRAME of 1 MiB.
    static let payloadBytes = (1 << 20) - 1024
    static let rssLimit = 64 << 20

    @Test(.timeLimit(.minutes(10)))
    func aClientPipeliningAGibibyte_andOneThatNeverReads_holdTheDaemonUnder64MiB_andEveryMessageArrivesOnce() async throws {
        try await withLoadCluster { cluster in
            try await cluster.stopServer()
            let shared = SharedFlags()
            let socketPath = cluster.socketPath
            let pipeliner = try Pipeliner(socketPath: socketPath)
            let sending = Task.detached { await onThreads(1) { _ in pipeliner.sendAll(Self.messages, payloadBytes: Self.payloadBytes) } }
            let receiving = Task.detached { await onThreads(1) { _ in pipeliner.receive(Self.messages, until: shared) } }
            let nonReader = Task.detached {
                await onThreads(1) { _ in Self.askWithoutReading(socketPath, shared) }
            }

            var peak = 0
            let started = ContinuousClock.now
            while pipeliner.accepted.load(ordering: .relaxed) < Self.messages, ContinuousClock.now < started + .seconds(300) {
                peak = max(peak, cluster.daemonAnonymousRSS() ?? 0)
                try await Task.sleep(for: .milliseconds(100))
            }
            for _ in 0..<10 {
                peak = max(peak, cluster.daemonAnonymousRSS() ?? 0)
                try await Task.sleep(for: .milliseconds(100))
            }
            await sending.value
            let accepted = pipeliner.accepted.load(ordering: .relaxed)
            print("\(accepted) messages of \(Self.payloadBytes) B accepted in \(ContinuousClock.now - started) with the server down, "
                  + "beside \(shared.statusRequests.load(ordering: .relaxed)) STATUS requests never read; imagentd RssAnon peak \(peak >> 20) MiB")
            #expect(accepted == Self.messages)
            #expect(shared.statusRequests.load(ordering: .relaxed) > 10_000, "the client that never reads asked too little to matter")
            #expect(peak > 0 && peak <= Self.rssLimit, "RssAnon \(peak) bytes while queueing")

            let drainStart = ContinuousClock.now
            try await cluster.startServer()
            while pipeliner.received.load(ordering: .relaxed) < Self.messages, ContinuousClock.now < drainStart + .seconds(300) {
                try await Task.sleep(for: .milliseconds(200))
            }
            shared.stop.store(true, ordering: .relaxed)
            await receiving.value
            await nonReader.value
            print("echoed in \(ContinuousClock.now - drainStart): \(pipeliner.report)")
            #expect(pipeliner.problems == [], "\(cluster.tail("imagentd.log"))")
            #expect(pipeliner.received.load(ordering: .relaxed) == Self.messages)
        }
    }

    /// HELLO, then STATUS requests as fast as the socket takes them, never reading; when the
    /// daemon gives up on the connection, a new one, until `stop`.
    private static func askWithoutReading(_ path: String, _ shared: SharedFlags) {
        let batch = (0..<256).flatMap { RawIPCSocket.frame(op: 0x0010, request: UInt32(2 + $0)) }
        while !shared.stop.load(ordering: .relaxed) {
            guard let socket = try? RawIPCSocket(path: path, timeout: .seconds(1)), socket.write(RawIPCSocket.hello()) else {
                usleep(50_000)
                continue
            }
            // A write that times out (the daemon stopped reading) or fails (it closed) ends this connection.
            while !shared.stop.load(ordering: .relaxed), socket.write(batch) {
                shared.statusRequests.add(256, ordering: .relaxed)
            }
        }
    }
}

/// What the test's threads share: when to stop, and how many STATUS requests went unread.
private final class SharedFlags: Sendable {
    let stop = Atomic<Bool>(false)
    let statusRequests = Atomic<Int>(0)
}

/// One connection, one echo session: a thread writes every SEND back to back (the payload's
/// first 8 bytes are its index), another reads what comes back: ACCEPTED, then the echoes,
/// which must be every index once, in order.
private final class Pipeliner: @unchecked Sendable {  // `socket`'s reads on one thread, writes on another
    let socket: RawIPCSocket
    let session: UInt64
    let accepted = Atomic<Int>(0)
    let received = Atomic<Int>(0)
    private let lock = NSLock()
    private var failures: [String] = []

    var problems: [String] { lock.withLock { failures } }
    var report: String { "accepted \(accepted.load(ordering: .relaxed)), echoed \(received.load(ordering: .relaxed)), problems \(problems.prefix(5))" }

    init(socketPath: String) throws {
        // Reads time out often, so that the receiving thread sees `stop`; a write waits as long as
        // the daemon holds it back (it stops reading this socket while the SENDs before wait for the
        // store, longer on a loaded machine): a write cut short leaves half a frame on the socket.
        socket = try RawIPCSocket(path: socketPath, timeout: .seconds(2), writeTimeout: .seconds(120))
        socket.write(RawIPCSocket.hello())
        guard case .frame(let welcome) = socket.read(), welcome.op == 0x8001 else { throw RealDaemonError("no WELCOME") }
        socket.write(Self.encoded(.open(.init(service: "echo")), request: 1))
        guard case .frame(let opened) = socket.readReply(), opened.op == 0x8002, let id = opened.records[0x0010], id.count == 8 else {
            throw RealDaemonError("no OPENED")
        }
        session = id.reduce(0) { $0 << 8 | UInt64($1) }
    }

    func sendAll(_ count: Int, payloadBytes: Int) {
        var payload = ByteBuffer(repeating: 0x5A, count: payloadBytes)
        for index in 0..<count {
            payload.setInteger(UInt64(index), at: 0)
            guard socket.write(Self.encoded(.send(.init(session: session, payload: payload)), request: UInt32(2 + index))) else {
                fail("SEND \(index) not written: the daemon closed the connection")
                return
            }
        }
    }

    func receive(_ count: Int, until shared: SharedFlags) {
        var next: UInt64 = 1
        while received.load(ordering: .relaxed) < count, !shared.stop.load(ordering: .relaxed) {
            let frame: RawIPCSocket.Frame
            switch socket.read() {
            case .frame(let read): frame = read
            case .timedOut: continue
            case .closed:
                fail("the daemon closed the connection after \(received.load(ordering: .relaxed)) echoes")
                return
            }
            switch frame.op {
            case 0x8005: accepted.add(1, ordering: .relaxed)
            case 0x9001:
                let seq = frame.records[0x0015].map { $0.reduce(UInt64(0)) { $0 << 8 | UInt64($1) } } ?? 0
                let index = frame.records[0x001A].map { $0.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } }
                if seq != next || index != seq - 1 { fail("MESSAGE seq \(seq) carrying index \(index ?? 0) where seq \(next) was due") }
                next = seq + 1
                received.add(1, ordering: .relaxed)
            case 0x9002...0x9010: break  // ACKED, SESSION_STATE, LINK_STATE…
            default: fail("unexpected frame \(frame)")
            }
        }
    }

    private func fail(_ text: String) {
        lock.withLock { if failures.count < 10 { failures.append(text) } }
    }

    static func encoded(_ message: IPCMessage, request: UInt32) -> [UInt8] {
        Array(IPCFrame(request: request, message: message).encoded().readableBytesView)
    }
}
