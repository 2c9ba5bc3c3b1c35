/// Number formatting without Foundation, for tables to paste into BENCHMARKS.md.

func pad(_ text: String, _ width: Int) -> String {
    text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
}

func format(_ value: Double, decimals: Int = 0) -> String {
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
