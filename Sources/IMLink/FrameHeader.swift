import NIOCore

/// The fixed 32-byte header in front of every IMLink/1 frame:
///
/// ```
///  0       2   3   4       6       8               16              24      28      32
/// +-------+---+---+-------+-------+---------------+---------------+-------+-------+
/// | magic |ver|typ| flags | rsvd  |   session     |      seq      |length |  crc  |
/// | "IM"  | 1 |   |       |   0   |     u64       |      u64      |  u32  |  u32  |
/// +-------+---+---+-------+-------+---------------+---------------+-------+-------+
/// ```
///
/// `crc` is CRC-32C over bytes 0–27 followed by the body.
public enum FrameHeader {
    public static let size = 32
    public static let magic: UInt16 = 0x494D
    public static let version: UInt8 = 1
    /// Flag bit 0: the DATA body is raw DEFLATE.
    public static let compressedFlag: UInt16 = 1
    /// The largest body accepted before HELLO_OK, and the default after it.
    public static let defaultMaxBody: UInt32 = 1 << 20
    /// The largest body a peer may ever negotiate.
    public static let maxNegotiableBody: UInt32 = 16 << 20

    static let lengthOffset = 24
    static let crcOffset = 28
}
