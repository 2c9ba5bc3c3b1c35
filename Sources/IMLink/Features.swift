/// The `FEATURES` bitmap of HELLO and HELLO_OK.
public struct Features: OptionSet, Hashable, Sendable {
    public var rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// DATA bodies may be raw DEFLATE (flag `COMPRESSED`).
    public static let deflate = Features(rawValue: 1 << 0)
    /// Per-session WINDOW flow control.
    public static let flow = Features(rawValue: 1 << 1)
}
