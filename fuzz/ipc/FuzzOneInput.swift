import AgentIPC
import NIOCore

/// A small MAX_PAYLOAD so the fuzzer reaches the frame-too-large path with
/// short inputs as well as frames that fit.
private let fuzzMaxPayload: UInt32 = 4096

/// libFuzzer's entry point: parses `count` bytes as a stream of frames until
/// the parser wants more bytes or refuses them. Every frame that decodes must
/// re-encode to the same number of bytes and decode again to an equal value;
/// anything else is a codec bug, reported by crashing.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    var stream = ByteBuffer(bytes: UnsafeRawBufferPointer(start: start, count: count))
    while true {
        let before = stream.readableBytes
        let frame: IPCFrame
        do {
            guard let decoded = try IPCFrameParser.parse(&stream, maxPayload: fuzzMaxPayload) else { break }
            frame = decoded
        } catch {
            precondition(stream.readableBytes == before, "a refused frame must leave the buffer untouched")
            precondition(!error.description.isEmpty)
            break
        }
        var encoded = frame.encoded()
        precondition(encoded.readableBytes == before - stream.readableBytes,
                     "re-encoding \(frame) gave \(encoded.readableBytes) bytes, the input frame had \(before - stream.readableBytes)")
        let again: IPCFrame?
        do {
            again = try IPCFrameParser.parse(&encoded, maxPayload: fuzzMaxPayload)
        } catch {
            preconditionFailure("re-encoded \(frame) does not decode: \(error)")
        }
        precondition(again == frame, "re-decoding \(frame) gave \(String(describing: again))")
        precondition(encoded.readableBytes == 0, "re-decoding left \(encoded.readableBytes) bytes")
    }
    return 0
}
