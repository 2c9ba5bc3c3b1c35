import IMLink
import NIOCore
#if !FUZZING
import FuzzReplay
#endif

/// libFuzzer entry point: any bytes as a stream of IMLink frames.
///
/// Whatever decodes must re-encode to a frame that decodes to the same value,
/// and the parser may never crash, hang, or hold more than the limit.
/// Random mutations almost never keep a CRC right, so when the first byte is
/// odd the rest is taken as frames whose CRCs are fixed up first: that half of
/// the runs reaches the TLV and typed-frame code behind the checksum.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzIMLink(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let limit: UInt32 = 64 * 1024
    guard count > 0 else { return 0 }
    var buffer = ByteBuffer(bytes: UnsafeBufferPointer(start: start + 1, count: count - 1))
    if start[0] & 1 == 1 { fixCRCs(&buffer) }
    while true {
        let frame: Frame?
        do {
            frame = try FrameParser.parse(&buffer, maxBody: limit)
        } catch {
            _ = error.description
            return 0
        }
        guard let frame else { return 0 }
        var again = frame.encoded()
        let reparsed = try? FrameParser.parse(&again, maxBody: limit + 64 * 1024)
        precondition(reparsed == frame, "re-encoded frame does not decode to the same value: \(frame)")
        if case .data(let data) = frame, data.compressed {
            _ = try? Deflate.inflate(data.body, limit: Int(limit))
        }
    }
}

/// Rewrites the CRC of every complete frame in `buffer`, walking by `length`.
private func fixCRCs(_ buffer: inout ByteBuffer) {
    var offset = buffer.readerIndex
    while let length = buffer.getInteger(at: offset + 24, as: UInt32.self),
          offset + 32 + Int(length) <= buffer.writerIndex {
        var crc = CRC32C()
        crc.update(buffer.getSlice(at: offset, length: 28)!)
        crc.update(buffer.getSlice(at: offset + 32, length: Int(length))!)
        buffer.setInteger(crc.value, at: offset + 28)
        offset += 32 + Int(length)
    }
}

#if !FUZZING
@main
struct ReplayIMLinkInputs {
    static func main() {
        replayInputs(tool: "fuzz-imlink") { fuzzIMLink($0.assumingMemoryBound(to: UInt8.self), $1) }
    }
}
#endif
