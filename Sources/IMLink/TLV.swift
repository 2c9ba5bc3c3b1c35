import NIOCore

/// One TLV record as it travels in IMLink control bodies and in Agent IPC frames:
///
/// ```
///  0        2                6
/// +--------+----------------+----------------------+
/// | tag:16 |     len:32     |  value (len bytes)   |
/// +--------+----------------+----------------------+
/// ```
public struct TLVRecord: Hashable, Sendable {
    public var tag: UInt16
    public var value: ByteBuffer

    public init(tag: UInt16, value: ByteBuffer) {
        self.tag = tag
        self.value = value
    }

    /// Bytes the record takes on the wire.
    public var encodedSize: Int { 6 + value.readableBytes }
}

/// Why a TLV body was refused. Tags are raw so each protocol names them itself.
public enum TLVError: Error, Hashable, Sendable {
    /// A record header or value runs past the end of the body.
    case overrun(tag: UInt16?, declared: UInt32?, remaining: Int)
    /// A known tag whose value has the wrong size.
    case wrongSize(tag: UInt16, expected: Int, actual: Int)
    /// A string or byte value whose length is outside what the protocol allows.
    case lengthOutOfRange(tag: UInt16, length: Int, allowed: ClosedRange<Int>)
    /// A known tag that may appear once appeared twice.
    case duplicate(tag: UInt16)
    /// A required record is missing.
    case missing(tag: UInt16)
    /// A text value is not valid UTF-8.
    case invalidUTF8(tag: UInt16)
}

extension ByteBuffer {
    /// Splits a whole body into records, in order, without copying values.
    public func tlvRecords() throws(TLVError) -> [TLVRecord] {
        var body = self
        var records: [TLVRecord] = []
        while body.readableBytes > 0 {
            guard body.readableBytes >= 6,
                  let tag = body.readInteger(as: UInt16.self),
                  let length = body.readInteger(as: UInt32.self)
            else {
                throw .overrun(tag: body.getInteger(at: body.readerIndex, as: UInt16.self), declared: nil, remaining: body.readableBytes)
            }
            guard UInt64(length) <= UInt64(body.readableBytes), let value = body.readSlice(length: Int(length)) else {
                throw .overrun(tag: tag, declared: length, remaining: body.readableBytes)
            }
            records.append(TLVRecord(tag: tag, value: value))
        }
        return records
    }

    @inlinable @discardableResult
    public mutating func writeTLV(tag: UInt16, value: ByteBuffer) -> Int {
        writeInteger(tag) + writeInteger(UInt32(value.readableBytes)) + writeImmutableBuffer(value)
    }

    @inlinable @discardableResult
    public mutating func writeTLV<I: FixedWidthInteger>(tag: UInt16, integer: I) -> Int {
        let count = 6 + MemoryLayout<I>.size
        writeBigEndian(count: count) { record in
            record.put(tag)
            record.put(UInt32(MemoryLayout<I>.size))
            record.put(integer)
        }
        return count
    }

    @inlinable @discardableResult
    public mutating func writeTLV(tag: UInt16, string: String) -> Int {
        let start = writerIndex
        writeInteger(tag)
        let lengthIndex = writerIndex
        writeInteger(UInt32(0))
        let written = writeString(string)
        setInteger(UInt32(written), at: lengthIndex)
        return writerIndex - start
    }

    @inlinable @discardableResult
    public mutating func writeTLV(tag: UInt16, bytes: some Collection<UInt8>) -> Int {
        writeInteger(tag) + writeInteger(UInt32(bytes.count)) + writeBytes(bytes)
    }
}

/// The records of one body, looked up by tag while a typed message is built.
///
/// Construction checks that no tag in `known` repeats. Each lookup finds a
/// record by tag, checks its size and converts it; records with tags not in
/// `known` are kept, in order, as `extensions`.
///
/// `known` is a short list (a frame type's tags): it is searched, not hashed,
/// and repeats are found with one bit per known tag, so decoding a frame
/// builds no set (this runs once per frame on the daemon's message path).
public struct TLVFields {
    @usableFromInline let records: [TLVRecord]
    private let known: [UInt16]

    public init(body: ByteBuffer, known: [UInt16]) throws(TLVError) {
        precondition(known.count <= 64, "at most 64 known tags (one bit each)")
        self.records = try body.tlvRecords()
        self.known = known
        var seen: UInt64 = 0
        for record in records {
            guard let index = known.firstIndex(of: record.tag) else { continue }
            let bit: UInt64 = 1 << UInt64(index)
            guard seen & bit == 0 else { throw .duplicate(tag: record.tag) }
            seen |= bit
        }
    }

    /// Records whose tags were not named as known, in the order they came.
    public var extensions: [TLVRecord] { records.filter { !known.contains($0.tag) } }

    @usableFromInline func value(_ tag: UInt16) -> ByteBuffer? {
        records.first(where: { $0.tag == tag })?.value
    }

    // Inlinable, so that callers in other modules (the IPC codec) get them
    // specialized for their integer type instead of generic calls per record.
    @inlinable
    public func integer<I: FixedWidthInteger>(_ tag: UInt16, as: I.Type = I.self) throws(TLVError) -> I? {
        guard let value = value(tag) else { return nil }
        guard value.readableBytes == MemoryLayout<I>.size, let integer = value.getInteger(at: value.readerIndex, as: I.self) else {
            throw .wrongSize(tag: tag, expected: MemoryLayout<I>.size, actual: value.readableBytes)
        }
        return integer
    }

    @inlinable
    public func requiredInteger<I: FixedWidthInteger>(_ tag: UInt16, as: I.Type = I.self) throws(TLVError) -> I {
        guard let integer = try integer(tag, as: I.self) else { throw .missing(tag: tag) }
        return integer
    }

    public func string(_ tag: UInt16, length allowed: ClosedRange<Int> = 0...Int.max) throws(TLVError) -> String? {
        guard let value = value(tag) else { return nil }
        guard allowed.contains(value.readableBytes) else {
            throw .lengthOutOfRange(tag: tag, length: value.readableBytes, allowed: allowed)
        }
        let string = value.withUnsafeReadableBytes { String(validating: $0, as: UTF8.self) }
        guard let string else { throw .invalidUTF8(tag: tag) }
        return string
    }

    public func requiredString(_ tag: UInt16, length allowed: ClosedRange<Int> = 0...Int.max) throws(TLVError) -> String {
        guard let string = try string(tag, length: allowed) else { throw .missing(tag: tag) }
        return string
    }

    public func bytes(_ tag: UInt16, length allowed: ClosedRange<Int> = 0...Int.max) throws(TLVError) -> ByteBuffer? {
        guard let value = value(tag) else { return nil }
        guard allowed.contains(value.readableBytes) else {
            throw .lengthOutOfRange(tag: tag, length: value.readableBytes, allowed: allowed)
        }
        return value
    }

    public func requiredBytes(_ tag: UInt16, length allowed: ClosedRange<Int> = 0...Int.max) throws(TLVError) -> ByteBuffer {
        guard let bytes = try bytes(tag, length: allowed) else { throw .missing(tag: tag) }
        return bytes
    }
}
