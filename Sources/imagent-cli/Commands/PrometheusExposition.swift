/// METRICS as the Prometheus text exposition format (version 0.0.4).
///
/// `counters.x` becomes the counter `imagent_x_total`, `gauges.x` the gauge
/// `imagent_x`; members of any other section are `untyped`. A nested object
/// adds its keys to the name (`gauges.rtt_ms.p99` → `imagent_rtt_ms_p99`).
/// Characters outside `[a-zA-Z0-9_:]` become `_`. Booleans are 1 and 0;
/// strings, nulls and arrays have no sample and are left out.
enum PrometheusExposition {
    static func render(_ metrics: JSONValue) -> [String] {
        var lines: [String] = []
        for section in metrics.members ?? [] {
            guard let entries = section.value.members else { continue }
            let type = switch section.key {
            case "counters": "counter"
            case "gauges": "gauge"
            default: "untyped"
            }
            var samples: [(String, String)] = []
            collect(entries, prefix: "imagent_", into: &samples)
            for (name, value) in samples {
                let fullName = type == "counter" && !name.hasSuffix("_total") ? name + "_total" : name
                lines.append("# TYPE \(fullName) \(type)")
                lines.append("\(fullName) \(value)")
            }
        }
        return lines
    }

    private static func collect(_ members: [JSONValue.Member], prefix: String, into samples: inout [(String, String)]) {
        for member in members {
            let name = prefix + sanitized(member.key)
            switch member.value {
            case .number(let text): samples.append((name, text))
            case .bool(let flag): samples.append((name, flag ? "1" : "0"))
            case .object(let nested): collect(nested, prefix: name + "_", into: &samples)
            case .null, .string, .array: continue
            }
        }
    }

    /// A metric name may hold only `[a-zA-Z0-9_:]`.
    static func sanitized(_ key: String) -> String {
        String(key.unicodeScalars.map { scalar -> Character in
            switch scalar {
            case "a"..."z", "A"..."Z", "0"..."9", "_", ":": Character(scalar)
            default: "_"
            }
        })
    }
}
