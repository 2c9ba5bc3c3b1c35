// agentstore-crash-writer DATABASE process|power [PAYLOAD_BYTES]
//
// The child process of AgentStoreTests' crash test. It appends to one session
// of the store at DATABASE as fast as group commit allows — each submission
// an outbound and an inbound message with the same seq, atomically — and
// writes "<seq>\n" to stdout (one write(2), no buffering) the moment the
// commit holding that seq has completed. It never stops by itself: the test
// kills it with SIGKILL at a random moment and then checks that every seq
// printed is in the database, intact. Started again on the same database it
// resumes after the highest seq stored.
//
// Payload of seq s (the test recomputes it): PAYLOAD_BYTES (default 64) bytes,
// s as 8 bytes little endian, then byte i (8 ≤ i) = (s + i) mod 256.
//
// With PAYLOAD_BYTES, payloads go to the store's segment files (1 MiB each), and
// each submission also acknowledges the messages of both queues up to seq - 32, so
// segments are created and deleted while the test kills the writer.

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import AgentStore
import NIOCore
import NIOPosix

func fail(_ message: String) -> Never {
    let line = "agentstore-crash-writer: \(message)\n"
    _ = line.utf8CString.withUnsafeBufferPointer { write(2, $0.baseAddress, $0.count - 1) }
    exit(2)
}

let arguments = CommandLine.arguments
guard arguments.count == 3 || arguments.count == 4, let durability = Durability(rawValue: arguments[2]),
      let payloadBytes = arguments.count == 4 ? Int(arguments[3]) : 64, payloadBytes >= 8 else {
    fail("usage: agentstore-crash-writer DATABASE process|power [PAYLOAD_BYTES]")
}
let large = arguments.count == 4
/// Outbound messages more than this many seqs behind are acknowledged (large payloads only).
let acknowledgedLag: UInt64 = 32

/// 0, 1, …, 255, 0, 1, …: payload bytes are a slice of it, copied at once rather than byte by byte.
let ramp = (0..<payloadBytes + 256).map { UInt8(truncatingIfNeeded: $0) }

@Sendable func payload(_ seq: UInt64) -> ByteBuffer {
    var buffer = ByteBuffer()
    buffer.reserveCapacity(payloadBytes)
    buffer.writeInteger(seq, endianness: .little)
    let start = Int(seq % 256)
    buffer.writeBytes(ramp[start + 8..<start + payloadBytes])
    return buffer
}

let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
let loop = group.next()
let store: AgentStore
let session: UInt64
let first: UInt64
do {
    var configuration = StoreConfiguration(path: arguments[1], durability: durability)
    if large {
        configuration.largePayloadBytes = 64
        configuration.segmentFileBytes = 1 << 20
    }
    store = try AgentStore.open(configuration, on: loop).wait()
    // The writer's one session: found again after a kill, created on the first run.
    let sessions = try store.loadIndex(on: loop).wait().sessions
    if let record = sessions.first?.record {
        guard sessions.count == 1 else { fail("\(sessions.count) sessions in the store, one expected") }
        session = record.id
        first = record.sentSeq + 1
    } else {
        session = try store.createSession(service: "crash", ownerUID: 0, createdAtMS: 0, on: loop).wait().id
        first = 1
    }
} catch {
    fail("\(error)")
}

/// Keeps `window` submissions in flight, so every commit has company to batch with.
let window = 64
/// The next seq to assign; like the daemon, the writer assigns seqs on its loop.
let next = NIOLoopBoundBox.makeBoxSendingValue(first, eventLoop: loop)
@Sendable func submitNext() {
    let seq = next.value
    next.value += 1
    var operations: [StoreOperation] = [.appendOutbound(session: session, seq: seq, payload: payload(seq), expiresAtMS: nil),
                                        .appendInbound(session: session, seq: seq, payload: payload(seq))]
    if large, seq > acknowledgedLag {
        operations.append(.markAcked(session: session, upTo: seq - acknowledgedLag))
        operations.append(.markDelivered(session: session, upTo: seq - acknowledgedLag))
    }
    store.perform(operations, on: loop)
        .whenComplete { result in
            switch result {
            case .success:
                let line = "\(seq)\n"
                _ = line.utf8CString.withUnsafeBufferPointer { write(1, $0.baseAddress, $0.count - 1) }
                submitNext()
            case .failure(let error):
                fail("seq \(seq): \(error)")
            }
        }
}
loop.execute {
    for _ in 0..<window { submitNext() }
}
while true { pause() }
