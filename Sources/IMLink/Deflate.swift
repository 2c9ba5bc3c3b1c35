import CZlib
import NIOCore

/// Raw DEFLATE (RFC 1951) for DATA bodies with the `COMPRESSED` flag.
public enum Deflate {
    public enum Failure: Error, Hashable, Sendable {
        /// The body is not a complete, valid raw DEFLATE stream.
        case corrupt
        /// Inflating would exceed `limit` bytes (a compression bomb, or a
        /// payload larger than the peer may send).
        case tooLarge(limit: Int)
    }

    /// Inflates `body`, refusing to produce more than `limit` bytes.
    public static func inflate(_ body: ByteBuffer, limit: Int, allocator: ByteBufferAllocator = ByteBufferAllocator()) throws(Failure) -> ByteBuffer {
        var stream = z_stream()
        guard inflateInit2_(&stream, -MAX_WBITS, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else { throw .corrupt }
        defer { inflateEnd(&stream) }

        var output = allocator.buffer(capacity: min(max(body.readableBytes * 4, 256), limit + 1))
        let status: Int32 = body.withUnsafeReadableBytes { input in
            stream.next_in = UnsafeMutablePointer(mutating: input.bindMemory(to: Bytef.self).baseAddress)
            stream.avail_in = UInt32(input.count)
            while true {
                if output.writableBytes == 0 {
                    guard output.capacity <= limit else { return Z_BUF_ERROR }
                    output.reserveCapacity(min(output.capacity * 2, limit + 1))
                }
                let (written, result) = output.withUnsafeMutableWritableBytes { space -> (Int, Int32) in
                    stream.next_out = space.bindMemory(to: Bytef.self).baseAddress
                    stream.avail_out = UInt32(space.count)
                    let result = CZlib.inflate(&stream, Z_NO_FLUSH)
                    return (space.count - Int(stream.avail_out), result)
                }
                output.moveWriterIndex(forwardBy: written)
                if output.readableBytes > limit { return Z_BUF_ERROR }
                switch result {
                case Z_STREAM_END: return Z_STREAM_END
                case Z_OK: continue
                case Z_BUF_ERROR where stream.avail_in == 0 && output.writableBytes > 0: return Z_DATA_ERROR
                case Z_BUF_ERROR: continue
                default: return result
                }
            }
        }
        switch status {
        case Z_STREAM_END: return output
        case Z_BUF_ERROR: throw .tooLarge(limit: limit)
        default: throw .corrupt
        }
    }

    /// Compresses `payload` as raw DEFLATE at the default level.
    public static func deflate(_ payload: ByteBuffer, allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        var stream = z_stream()
        precondition(deflateInit2_(&stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY,
                                   ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK,
                     "zlib refused default deflate parameters")
        defer { deflateEnd(&stream) }
        let bound = Int(deflateBound(&stream, UInt(payload.readableBytes)))
        var output = allocator.buffer(capacity: bound)
        payload.withUnsafeReadableBytes { input in
            stream.next_in = UnsafeMutablePointer(mutating: input.bindMemory(to: Bytef.self).baseAddress)
            stream.avail_in = UInt32(input.count)
            let written = output.withUnsafeMutableWritableBytes { space -> Int in
                stream.next_out = space.bindMemory(to: Bytef.self).baseAddress
                stream.avail_out = UInt32(space.count)
                let result = CZlib.deflate(&stream, Z_FINISH)
                precondition(result == Z_STREAM_END, "deflateBound guarantees room for Z_FINISH")
                return space.count - Int(stream.avail_out)
            }
            output.moveWriterIndex(forwardBy: written)
        }
        return output
    }
}
