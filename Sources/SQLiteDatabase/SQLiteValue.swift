/// A value bound to a statement parameter or read from a result column.
public enum SQLiteValue: Hashable, Sendable {
    case null
    case integer(Int64)
    case text(String)
    case blob([UInt8])
}
