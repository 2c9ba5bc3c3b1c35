/// How numbers from the daemon read for people: "1h 2m 3s", "12.5 ms",
/// "2025-06-01 12:00:00 UTC". Every function takes the JSON value as sent and
/// falls back to "-" for a missing one and to the raw text for an odd one,
/// so a newer daemon's output never breaks the CLI.
enum HumanFormat {
    /// Seconds as "3d 4h 5m", "1h 2m 3s", "42s".
    static func duration(seconds value: JSONValue?) -> String {
        guard let value else { return "-" }
        guard let seconds = value.double, seconds >= 0, seconds < 1e12 else { return value.displayText }
        return duration(seconds: Int(seconds))
    }

    static func duration(seconds total: Int) -> String {
        let days = total / 86_400, hours = total % 86_400 / 3600, minutes = total % 3600 / 60, seconds = total % 60
        if days > 0 { return "\(days)d \(hours)h \(minutes)m" }
        if hours > 0 { return "\(hours)h \(minutes)m \(seconds)s" }
        if minutes > 0 { return "\(minutes)m \(seconds)s" }
        return "\(seconds)s"
    }

    /// A number followed by its unit: "12.5 ms", "30 s".
    static func quantity(_ value: JSONValue?, unit: String) -> String {
        guard let value else { return "-" }
        guard let number = value.double else { return value.displayText }
        return "\(decimal(number)) \(unit)"
    }

    /// A size in bytes as "512 B", "1.5 KiB", "12.3 MiB".
    static func bytes(_ value: JSONValue?) -> String {
        guard let value else { return "-" }
        guard let count = value.double, count >= 0 else { return value.displayText }
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var size = count, unit = 0
        while size >= 1024, unit < units.count - 1 {
            size /= 1024
            unit += 1
        }
        return unit == 0 ? "\(Int(size)) B" : "\(decimal((size * 10).rounded() / 10)) \(units[unit])"
    }

    /// At most three decimals, without trailing zeros: 12.5, 0.042, 30.
    static func decimal(_ number: Double) -> String {
        let thousandths = (number * 1000).rounded()
        guard abs(thousandths) < 1e15 else { return "\(number)" }
        let whole = Int64(thousandths) / 1000, fraction = abs(Int64(thousandths) % 1000)
        guard fraction > 0 else { return "\(whole)" }
        var digits = String(fraction)
        digits = String(repeating: "0", count: 3 - digits.count) + digits
        while digits.hasSuffix("0") { digits.removeLast() }
        return (thousandths < 0 && whole == 0 ? "-" : "") + "\(whole).\(digits)"
    }

    /// Milliseconds since the epoch as "2025-06-01 12:00:00 UTC".
    static func timestamp(milliseconds value: JSONValue?) -> String {
        guard let value else { return "-" }
        guard let milliseconds = value.double, milliseconds >= 0, milliseconds < 1e15 else { return value.displayText }
        let (date, seconds) = civil(Int64(milliseconds) / 1000)
        return "\(date) \(clock(seconds)) UTC"
    }

    /// Milliseconds since the epoch as the time of day, "12:00:01.234", for
    /// the lines of `watch`.
    static func timeOfDay(milliseconds value: JSONValue?) -> String {
        guard let milliseconds = value?.double, milliseconds >= 0, milliseconds < 1e15 else { return "-" }
        let whole = Int64(milliseconds)
        let fraction = String(whole % 1000)
        return clock(whole / 1000 % 86_400) + "." + String(repeating: "0", count: 3 - fraction.count) + fraction
    }

    /// "2025-06-01" and the second of that day, from seconds since the epoch
    /// (Howard Hinnant's days-to-civil algorithm; the CLI has no calendar library).
    private static func civil(_ epochSeconds: Int64) -> (String, Int64) {
        let days = epochSeconds / 86_400
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return ("\(year)-\(twoDigits(month))-\(twoDigits(day))", epochSeconds % 86_400)
    }

    private static func clock(_ secondOfDay: Int64) -> String {
        "\(twoDigits(secondOfDay / 3600)):\(twoDigits(secondOfDay % 3600 / 60)):\(twoDigits(secondOfDay % 60))"
    }

    private static func twoDigits(_ value: Int64) -> String {
        value < 10 ? "0\(value)" : "\(value)"
    }
}
