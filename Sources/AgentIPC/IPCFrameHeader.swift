/// The fixed 10-byte head of every Agent IPC/1 frame (`ipc.md` section 2):
///
/// ```
///  0               4       6               10
/// +---------------+-------+---------------+---------------------------+
/// |  length:u32   | op:16 |  request:u32  | TLV records …             |
/// +---------------+-------+---------------+---------------------------+
///                  <────────── length bytes (at least 6) ────────────>
/// ```
///
/// `length` counts every byte after itself, so it is at least 6 (op and
/// request with no records). All integers are big-endian.
public enum IPCFrameHeader {
    /// Bytes of the `length` field: all a receiver needs to refuse a frame.
    public static let lengthFieldSize = 4
    /// `length` + `op` + `request`.
    public static let size = 10
    /// The smallest legal `length`: an op and a request id with no records.
    public static let minimumLength: UInt32 = 6
    /// The MAX_PAYLOAD a daemon announces unless configured otherwise.
    public static let defaultMaxPayload: UInt32 = 1 << 20
    /// What a frame may carry beyond MAX_PAYLOAD: room for the op, the
    /// request id and the records around the payload itself.
    public static let recordHeadroom: UInt64 = 64 * 1024

    /// The largest `length` accepted when MAX_PAYLOAD is `maxPayload`.
    /// 64-bit so that a MAX_PAYLOAD near `UInt32.max` cannot wrap around.
    public static func lengthLimit(maxPayload: UInt32) -> UInt64 {
        UInt64(maxPayload) + recordHeadroom
    }
}
