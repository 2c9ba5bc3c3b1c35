import NIOCore

/// Gathers a large frame that arrives over several reads into a buffer of its own.
///
/// A byte-to-message decoder otherwise keeps the partial frame in its cumulation buffer, and
/// each frame parsed out of it leaves a body slice that shares that buffer's storage: when the
/// decoder compacts the buffer behind the frame, the shared storage is copied into a new
/// allocation, and the next read is copied in behind it. Gathered here, each byte of a large
/// frame is copied once, and the reads it came in are handed back at once.
///
/// The frame's size comes from its header, checked against the connection's limit first: an
/// oversized frame is refused before anything is allocated for it.
public struct FrameAssembly {
    /// Frames at least this large are gathered when they do not fit in what has arrived; a
    /// smaller one stays in the decoder's buffer, which costs less than an allocation of its own.
    public static let threshold = 16 * 1024

    /// What the decoder parses next.
    public enum Next {
        /// The front of the caller's buffer: a whole frame, a small one, or a header not yet complete.
        case inPlace
        /// A whole large frame, gathered: exactly its bytes.
        case gathered(ByteBuffer)
        /// A large frame is being gathered; every byte that had arrived is in it.
        case needMoreData
    }

    private var partial: ByteBuffer?
    private var size = 0
    private let allocator = ByteBufferAllocator()

    public init() {}

    /// True while part of a frame is held here, not in the caller's buffer.
    public var isGathering: Bool { partial != nil }

    /// Takes what `buffer` holds of a large frame, or says to parse `buffer` in place.
    ///
    /// `frameSize` reads the header at the front of a buffer: the whole frame's size, or nil
    /// while the header is incomplete or when the frame is not to be gathered. It throws
    /// for a header the decoder refuses.
    public mutating func next<E: Error>(from buffer: inout ByteBuffer,
                                        frameSize: (ByteBuffer) throws(E) -> Int?) throws(E) -> Next {
        if var gathered = partial {
            // Released first, so the write below finds the storage uniquely referenced.
            partial = nil
            let count = min(size - gathered.readableBytes, buffer.readableBytes)
            gathered.writeImmutableBuffer(buffer.readSlice(length: count)!)
            guard gathered.readableBytes == size else {
                partial = gathered
                return .needMoreData
            }
            return .gathered(gathered)
        }
        guard let whole = try frameSize(buffer), whole >= Self.threshold, whole > buffer.readableBytes
        else { return .inPlace }
        var gathered = allocator.buffer(capacity: whole)
        gathered.writeBuffer(&buffer)
        partial = gathered
        size = whole
        return .needMoreData
    }
}
