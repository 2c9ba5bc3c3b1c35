/// Number formatting without Foundation, for tables to paste into BENCHMARKS.md.

func pad(_ text: String, _ width: Int) -> String {
    text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
}

func format(_ value: Double, decimals: Int = 0) -> String {
    // A difference can be negative; the digits below are those of the magnitude.
    if value < 0 { return "-" + format(-value, decimals: decimals) }
    var scaled = value
    for _ in 0..<decimals { scaled *= 10 }
    let rounded = Int(scaled.rounded())
    if decimals == 0 { return String(rounded) }
    var divisor = 1
    for _ in 0..<decimals { divisor *= 10 }
    let fraction = String(rounded % divisor)
    return "\(rounded / divisor).\(String(repeating: "0", count: decimals - fraction.count))\(fraction)"
}

/// 1234567 → "1,234,567".
func grouped(_ value: Int) -> String {
    let digits = String(value.magnitude)
    var result = ""
    for (index, digit) in digits.enumerated() {
        if index > 0, (digits.count - index) % 3 == 0 { result.append(",") }
        result.append(digit)
    }
    return value < 0 ? "-" + result : result
}

/// "1GiB", "64MiB", "16KiB", "512B" or a plain number of bytes; nil if it is none of these.
func byteCount(_ text: String) -> Int? {
    for (suffix, unit) in [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("B", 1)] where text.hasSuffix(suffix) {
        return Int(text.dropLast(suffix.count)).map { $0 * unit }
    }
    return Int(text)
}

/// A byte count for people: 1.0 GiB, 64.0 MiB, 16 KiB, 300 B.
func bytesLabel(_ bytes: Int) -> String {
    if bytes >= 1 << 30 { return "\(format(Double(bytes) / Double(1 << 30), decimals: 1)) GiB" }
    if bytes >= 1 << 20 { return "\(format(Double(bytes) / Double(1 << 20), decimals: 1)) MiB" }
    if bytes >= 1 << 10, bytes % 1024 == 0 { return "\(bytes / 1024) KiB" }
    return "\(bytes) B"
}
