import MQTT5
import NIOCore
#if !FUZZING
import FuzzReplay
#endif

/// libFuzzer entry point: any bytes as a stream of MQTT 5 packets.
///
/// Whatever decodes must re-encode without error to bytes that decode to the
/// same value (the encoder may pick a shorter form than it was given, never a
/// different meaning), and the parser may never crash, hang, or buffer more
/// than the maximum packet size.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMQTT5(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let limit = 64 * 1024
    var buffer = ByteBuffer(bytes: UnsafeBufferPointer(start: start, count: count))
    while true {
        let packet: Packet?
        do {
            packet = try PacketParser.parse(&buffer, maxPacketSize: limit)
        } catch {
            _ = error.description
            _ = error.reasonCode
            return 0
        }
        guard let packet else { return 0 }
        var again: ByteBuffer
        do {
            again = try packet.encoded()
        } catch {
            preconditionFailure("a decoded packet does not re-encode: \(error); \(packet)")
        }
        let reparsed = try? PacketParser.parse(&again)
        precondition(reparsed == packet, "re-encoded packet does not decode to the same value: \(packet)")
        precondition(again.readableBytes == 0, "re-encoded packet has bytes left over: \(packet)")
    }
}

#if !FUZZING
@main
struct ReplayMQTT5Inputs {
    static func main() {
        replayInputs(tool: "fuzz-mqtt5") { fuzzMQTT5($0.assumingMemoryBound(to: UInt8.self), $1) }
    }
}
#endif
