import IMLink
import NIOCore

// Codec micro-benchmarks: each figure is the best of five runs of about
// `seconds`/5 seconds, in one process.

/// Runs `body` (which does `unit` units of work per call) for about `budget`
/// seconds, five times, and returns the best rate in units per second.
func bestRate(units unit: Int, budget: Double, _ body: () -> Void) -> Double {
    let clock = ContinuousClock()
    var best = 0.0
    for _ in 0..<5 {
        var done = 0
        let start = clock.now
        var elapsed = Duration.zero
        repeat {
            body()
            done += unit
            elapsed = clock.now - start
        } while elapsed < .milliseconds(Int64(budget * 1000 / 5))
        let rate = Double(done) / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        best = max(best, rate)
    }
    return best
}

/// `imagent-bench codec`: CRC-32C and DATA frame encode/decode rates.
func runCodec(seconds: Double) async {
    var crcRates: [Int: Double] = [:]
    var table = MarkdownTable([.number("size"), .number("CRC-32C MB/s"), .number("DATA encode frames/s"),
                               .number("DATA decode frames/s"), .number("decode MB/s")])
    print("CRC-32C (\(CRC32C.isHardwareAccelerated ? "SSE4.2 crc32, three streams" : "slicing-by-8"))")
    for size in [64, 1024, 65_536, 1 << 20] {
        let bytes = [UInt8](repeating: 0xA5, count: size)
        var sink: UInt32 = 0
        let rate = bestRate(units: size, budget: seconds) { sink &+= CRC32C.checksum(bytes) }
        precondition(sink != 1)
        crcRates[size] = rate
        print("  \(pad(String(size) + " B", 10)) \(format(rate / 1e6)) MB/s")
    }

    print("IMLink DATA frames (header + CRC + payload)")
    print("  \(pad("payload", 10)) \(pad("encode frames/s", 18)) \(pad("decode frames/s", 18)) decode MB/s")
    for size in [64, 1024, 65_536] {
        let frame = Frame.data(DataFrame(session: 42, seq: 1, body: ByteBuffer(repeating: 0x5A, count: size)))
        let batch = max(1, (1 << 20) / (size + 32))
        var out = ByteBuffer()
        out.reserveCapacity(batch * (size + 32))
        let encodeRate = bestRate(units: batch, budget: seconds) {
            out.clear()
            for _ in 0..<batch { frame.encode(into: &out) }
        }
        let stream = out
        let decodeRate = bestRate(units: batch, budget: seconds) {
            var input = stream
            var count = 0
            while let decoded = try! FrameParser.parse(&input, maxBody: FrameHeader.defaultMaxBody) {
                if case .data = decoded { count += 1 }
            }
            precondition(count == batch)
        }
        print("  \(pad(String(size) + " B", 10)) \(pad(format(encodeRate), 18)) \(pad(format(decodeRate), 18)) \(format(decodeRate * Double(size + 32) / 1e6))")
        table.add([sizeLabel(size), grouped(Int(crcRates[size] ?? 0) / 1_000_000), grouped(Int(encodeRate)), grouped(Int(decodeRate)),
                   grouped(Int(decodeRate * Double(size + 32) / 1e6))])
    }
    table.add([sizeLabel(1 << 20), grouped(Int(crcRates[1 << 20] ?? 0) / 1_000_000), "", "", ""])
    await printMarkdown(table)
}
