import Foundation

/// Delivery latencies (send → echo back, through daemon and server) from the
/// loadgens' `--latency-file`s, each stamped with when it was sent, so they
/// can be split by the phase they were sent in.
struct Latencies {
    /// (sent, Unix µs; latency, µs), in no particular order.
    private(set) var samples: [(sentUS: Int64, latencyUS: Int64)] = []

    mutating func read(_ path: String) {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return }
        for line in text.split(separator: "\n") {
            let words = line.split(separator: " ")
            guard words.count == 2, let sent = Int64(words[0]), let latency = Int64(words[1]) else { continue }
            samples.append((sent, latency))
        }
    }

    struct Summary {
        var count: Int
        var p50MS: Double
        var p99MS: Double
        var maxMS: Double
    }

    func summary(sentFromMS: Int64 = .min, toMS: Int64 = .max) -> Summary {
        let chosen = samples.lazy.filter { $0.sentUS / 1000 >= sentFromMS && $0.sentUS / 1000 < toMS }.map(\.latencyUS)
        let sorted = Array(chosen).sorted()
        guard !sorted.isEmpty else { return Summary(count: 0, p50MS: 0, p99MS: 0, maxMS: 0) }
        func percentile(_ p: Int) -> Double { Double(sorted[min(sorted.count - 1, sorted.count * p / 100)]) / 1000 }
        return Summary(count: sorted.count, p50MS: percentile(50), p99MS: percentile(99), maxMS: Double(sorted.last!) / 1000)
    }
}
