import AgentIPC
import NIOCore
import Testing

/// Sends payloads of `sizes` (around the size from which the daemon writes a payload as a buffer
/// of its own and carries its CRC through, and well above it) to the `echo` service through the
/// daemon at `socketPath`, and expects each echo back once, in order, byte for byte.
func expectLargeEchoesByteExact(socketPath: String, sizes: [Int] = [100, 16_383, 16_384, 65_536, 200_000, 64]) async throws {
    let client = try await IPCClient.connect(socketPath: socketPath, clientName: "large-echo")
    let session = try await client.open(service: "echo").session
    var events = client.events.makeAsyncIterator()
    let payloads = sizes.enumerated().map { index, size in
        ByteBuffer(bytes: (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index &* 7 &+ $0 >> 8) })
    }
    for payload in payloads { try await client.send(session: session, payload: payload) }
    var echoes: [ByteBuffer] = []
    while echoes.count < payloads.count, let event = try await events.next() {
        guard case .message(let message) = event else { continue }
        echoes.append(message.payload)
        try await client.ack(session: session, seq: message.seq)
    }
    #expect(echoes.map(\.readableBytes) == sizes)
    #expect(echoes == payloads, "an echo differs from what was sent")
    await client.close()
}
