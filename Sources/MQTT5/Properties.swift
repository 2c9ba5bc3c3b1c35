import NIOCore

/// One property's value, in the data type its identifier prescribes.
public enum PropertyValue: Hashable, Sendable {
    case byte(UInt8)
    case twoByteInteger(UInt16)
    case fourByteInteger(UInt32)
    case variableByteInteger(UInt32)
    case string(String)
    case binary(ByteBuffer)
    case stringPair(name: String, value: String)

    var dataType: PropertyIdentifier.DataType {
        switch self {
        case .byte: .byte
        case .twoByteInteger: .twoByteInteger
        case .fourByteInteger: .fourByteInteger
        case .variableByteInteger: .variableByteInteger
        case .string: .string
        case .binary: .binary
        case .stringPair: .stringPair
        }
    }

    var integer: UInt32? {
        switch self {
        case .byte(let value): UInt32(value)
        case .twoByteInteger(let value): UInt32(value)
        case .fourByteInteger(let value), .variableByteInteger(let value): value
        case .string, .binary, .stringPair: nil
        }
    }
}

public struct Property: Hashable, Sendable {
    public var identifier: PropertyIdentifier
    public var value: PropertyValue

    /// A property whose value is of the wrong data type for `identifier` is
    /// refused when it is encoded.
    public init(_ identifier: PropertyIdentifier, _ value: PropertyValue) {
        self.identifier = identifier
        self.value = value
    }

    /// An integer property, in whichever integer type `identifier` uses.
    public init(_ identifier: PropertyIdentifier, integer: UInt32) {
        let value: PropertyValue = switch identifier.dataType {
        case .byte: .byte(UInt8(integer))
        case .twoByteInteger: .twoByteInteger(UInt16(integer))
        case .fourByteInteger: .fourByteInteger(integer)
        case .variableByteInteger: .variableByteInteger(integer)
        case .string, .binary, .stringPair: preconditionFailure("\(identifier) is not an integer property")
        }
        self.init(identifier, value)
    }

    public static func user(_ name: String, _ value: String) -> Property {
        Property(.userProperty, .stringPair(name: name, value: value))
    }
}

/// A packet's property list (§2.2.2), in the order it travels, so a decoded
/// packet re-encodes to the same bytes.
///
/// ```
/// +--------------------------+-------+---------+-------+---------+--
/// | Property Length (VBI)    | id    | value   | id    | value   | …
/// +--------------------------+-------+---------+-------+---------+--
/// ```
public struct Properties: Hashable, Sendable, ExpressibleByArrayLiteral {
    public var entries: [Property]

    public init(_ entries: [Property] = []) {
        self.entries = entries
    }

    public init(arrayLiteral elements: Property...) {
        self.entries = elements
    }

    public var isEmpty: Bool { entries.isEmpty }

    public func value(_ identifier: PropertyIdentifier) -> PropertyValue? {
        entries.first { $0.identifier == identifier }?.value
    }

    /// The value of an integer property, whatever its width.
    public func integer(_ identifier: PropertyIdentifier) -> UInt32? {
        value(identifier)?.integer
    }

    public func string(_ identifier: PropertyIdentifier) -> String? {
        if case .string(let string) = value(identifier) { string } else { nil }
    }

    public func binary(_ identifier: PropertyIdentifier) -> ByteBuffer? {
        if case .binary(let bytes) = value(identifier) { bytes } else { nil }
    }

    /// Every User Property, in order; names may repeat (§3.3.2.3.7).
    public var userProperties: [(name: String, value: String)] {
        entries.compactMap { if case .stringPair(let name, let value) = $0.value { (name, value) } else { nil } }
    }

    /// Every Subscription Identifier, in order (PUBLISH may carry several).
    public var subscriptionIdentifiers: [UInt32] {
        entries.compactMap { $0.identifier == .subscriptionIdentifier ? $0.value.integer : nil }
    }

    /// Adds or replaces a property that may appear once.
    public mutating func set(_ property: Property) {
        entries.removeAll { $0.identifier == property.identifier }
        entries.append(property)
    }

    /// Applies the standard's rules for `context`: allowed identifiers, data
    /// types, forbidden values, and which properties may repeat.
    func validate(in context: PropertyContext) throws(MQTT5Error) {
        // The standard's identifiers run up to 0x2A: one bit each in a word, no set allocated per packet.
        var seen: UInt64 = 0
        for property in entries {
            let identifier = property.identifier
            guard identifier.isAllowed(in: context), property.value.dataType == identifier.dataType else {
                throw .propertyNotAllowed(identifier: UInt32(identifier.rawValue), in: context)
            }
            if let integer = property.value.integer, !identifier.isValid(integer) {
                throw .invalidPropertyValue(identifier, value: integer)
            }
            let bit: UInt64 = 1 << identifier.rawValue
            defer { seen |= bit }
            guard seen & bit == 0 || identifier.mayRepeat(in: context) else {
                throw .duplicateProperty(identifier)
            }
        }
    }

    // MARK: Decoding

    /// Reads a property list: its length, then properties until that length is used up.
    static func read(from reader: inout PacketReader, in context: PropertyContext) throws(MQTT5Error) -> Properties {
        // Field names are built only for an error: interpolating an enum goes through reflection.
        let length = try reader.variableInteger("\(context) property length")
        var list = try reader.subReader(length: Int(length), field: "\(context) properties")
        var properties = Properties()
        while list.remaining > 0 {
            properties.entries.append(try readOne(from: &list, in: context))
        }
        try properties.validate(in: context)
        return properties
    }

    private static func readOne(from reader: inout PacketReader, in context: PropertyContext) throws(MQTT5Error) -> Property {
        let raw = try reader.variableInteger("property identifier")
        guard raw < 0x80, let identifier = PropertyIdentifier(rawValue: UInt8(raw)), identifier.isAllowed(in: context) else {
            throw .propertyNotAllowed(identifier: raw, in: context)
        }
        func field() -> String { "property \(identifier)" }
        let value: PropertyValue = switch identifier.dataType {
        case .byte: .byte(try reader.byte(field()))
        case .twoByteInteger: .twoByteInteger(try reader.uint16(field()))
        case .fourByteInteger: .fourByteInteger(try reader.uint32(field()))
        case .variableByteInteger: .variableByteInteger(try reader.variableInteger(field()))
        case .string: .string(try reader.string(field()))
        case .binary: .binary(try reader.binary(field()))
        case .stringPair: .stringPair(name: try reader.string(field() + " name"), value: try reader.string(field() + " value"))
        }
        return Property(identifier, value)
    }

    // MARK: Encoding

    /// Bytes the properties take after their length.
    var contentSize: Int {
        entries.reduce(0) { $0 + 1 + Self.valueSize($1.value) }
    }

    private static func valueSize(_ value: PropertyValue) -> Int {
        switch value {
        case .byte: 1
        case .twoByteInteger: 2
        case .fourByteInteger: 4
        case .variableByteInteger(let value): VariableByteInteger.size(of: value)
        case .string(let string): 2 + string.utf8.count
        case .binary(let bytes): 2 + bytes.readableBytes
        case .stringPair(let name, let value): 4 + name.utf8.count + value.utf8.count
        }
    }

    func write(to buffer: inout ByteBuffer, in context: PropertyContext) throws(MQTT5Error) {
        try validate(in: context)
        let size = contentSize
        guard size <= VariableByteInteger.max else {
            throw .packetTooLarge(size: size, limit: Int(VariableByteInteger.max))
        }
        VariableByteInteger.write(UInt32(size), to: &buffer)
        for property in entries {
            buffer.writeInteger(property.identifier.rawValue)
            func field() -> String { "property \(property.identifier)" }
            switch property.value {
            case .byte(let value): buffer.writeInteger(value)
            case .twoByteInteger(let value): buffer.writeInteger(value)
            case .fourByteInteger(let value): buffer.writeInteger(value)
            case .variableByteInteger(let value): VariableByteInteger.write(value, to: &buffer)
            case .string(let string): try buffer.writeMQTTString(string, field: field())
            case .binary(let bytes): try buffer.writeMQTTBinary(bytes, field: field())
            case .stringPair(let name, let value):
                try buffer.writeMQTTString(name, field: field() + " name")
                try buffer.writeMQTTString(value, field: field() + " value")
            }
        }
    }
}
