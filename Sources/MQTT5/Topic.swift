/// The Topic Name and Topic Filter rules of §4.7.
public enum Topic {
    /// A Topic Name (PUBLISH, Will Topic): at least one character [MQTT-4.7.3-1],
    /// no wildcard [MQTT-3.3.2-2]. PUBLISH allows an empty name when a Topic
    /// Alias stands for it; its decoder checks that case itself.
    public static func isValidName(_ name: String) -> Bool {
        !name.isEmpty && !name.utf8.contains(where: { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "#") })
    }

    /// A Topic Filter (SUBSCRIBE, UNSUBSCRIBE): at least one character; `+`
    /// fills a whole level [MQTT-4.7.1-2]; `#` fills the last level [MQTT-4.7.1-1].
    /// A Shared Subscription is `$share/{ShareName}/{filter}`, the ShareName one
    /// level without wildcards, the filter itself valid [MQTT-4.8.2-1, -2].
    public static func isValidFilter(_ filter: String) -> Bool {
        if filter.hasPrefix("$share/") {
            let parts = filter.utf8.dropFirst(7).split(separator: UInt8(ascii: "/"), maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, let shareName = String(parts[0]), let rest = String(parts[1]) else { return false }
            return isValidName(shareName) && isValidPlainFilter(rest)
        }
        return isValidPlainFilter(filter)
    }

    private static func isValidPlainFilter(_ filter: String) -> Bool {
        guard !filter.isEmpty else { return false }
        let levels = filter.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        for (index, level) in levels.enumerated() {
            let hasPlus = level.contains(UInt8(ascii: "+"))
            let hasHash = level.contains(UInt8(ascii: "#"))
            if hasPlus && level.count != 1 { return false }
            if hasHash && (level.count != 1 || index != levels.count - 1) { return false }
        }
        return true
    }
}
