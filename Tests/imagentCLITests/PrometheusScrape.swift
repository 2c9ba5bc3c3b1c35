import Foundation
import IMAgentTestKit
import Testing

/// A scrape of imagentd's `[metrics] prometheus_listen`, parsed by Prometheus'
/// own Python parser (Debian's python3-prometheus-client): a scrape it refuses fails the test.
struct PrometheusScrape {
    /// Debian's interpreter: the parser is Debian's package, not in a pyenv.
    static let python = "/usr/bin/python3"

    /// {name: {type, help, samples}} as the parser read them.
    let families: [String: [String: Any]]

    /// Fetches `url` (or reads `text`) and parses it.
    init(url: String? = nil, text: String? = nil) async throws {
        let script = """
            import json, sys, urllib.request
            from prometheus_client.parser import text_string_to_metric_families
            text = urllib.request.urlopen(sys.argv[1], timeout=10).read().decode() if len(sys.argv) > 1 else sys.stdin.read()
            families = {}
            for family in text_string_to_metric_families(text):
                families[family.name] = {"type": family.type, "help": family.documentation,
                    "samples": [{"name": s.name, "labels": s.labels, "value": s.value} for s in family.samples]}
            print(json.dumps({"families": families}))
            """
        let output = try await ChildProcess.run(Self.python, ["-c", script] + (url.map { [$0] } ?? []), stdin: text ?? "",
                                                limit: .seconds(30))
        try #require(output.status == 0 && !output.signaled, "the Prometheus parser refused the scrape: \(output.stderr)")
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any])
        families = try #require(parsed["families"] as? [String: [String: Any]], "\(parsed)")
    }

    /// The body of one `GET /metrics` from 127.0.0.1:`port`, fetched in this process
    /// (a millisecond, where starting the parser takes a few hundred): for scrapes
    /// that must land while something short-lived runs. Parse it with `init(text:)`.
    static func fetchText(port: Int) throws -> String {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(descriptor >= 0, "socket: errno \(errno)")
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        try #require(connected, "connect to 127.0.0.1:\(port): errno \(errno)")
        let request = Array("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8)
        try #require(request.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) } == request.count, "write: errno \(errno)")
        var response: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            try #require(count >= 0, "read: errno \(errno)")
            if count == 0 { break }
            response += chunk[..<count]
            // Done once the head and Content-Length bytes of body are in (the server may keep the connection).
            if let end = headEnd(response), let length = contentLength(response[..<end]), response.count - end >= length { break }
        }
        let end = try #require(headEnd(response), "no HTTP head in \(response.count) bytes")
        let head = String(decoding: response[..<end], as: UTF8.self)
        try #require(head.hasPrefix("HTTP/1.1 200"), "\(head)")
        return String(decoding: response[end...], as: UTF8.self)
    }

    /// The offset just after the blank line that ends an HTTP head.
    private static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 3..<bytes.count where bytes[index - 3] == 13 && bytes[index - 2] == 10 && bytes[index - 1] == 13 && bytes[index] == 10 {
            return index + 1
        }
        return nil
    }

    private static func contentLength(_ head: ArraySlice<UInt8>) -> Int? {
        for line in String(decoding: head, as: UTF8.self).split(separator: "\r\n") {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == "content-length" { return Int(parts[1].trimmingCharacters(in: .whitespaces)) }
        }
        return nil
    }

    /// The sample `name{labels}`'s value (labels not given match anything).
    func value(_ name: String, labels: [String: String] = [:]) -> Double? {
        Self.value(in: families, name, labels: labels)
    }

    static func value(in families: [String: [String: Any]], _ name: String, labels: [String: String] = [:]) -> Double? {
        for family in families.values {
            for sample in family["samples"] as? [[String: Any]] ?? [] where sample["name"] as? String == name {
                let sampleLabels = sample["labels"] as? [String: String] ?? [:]
                if labels.allSatisfy({ sampleLabels[$0.key] == $0.value }) { return (sample["value"] as? NSNumber)?.doubleValue }
            }
        }
        return nil
    }

    /// The sum of every sample named `name` (all label values).
    func sum(_ name: String) -> Double {
        families.values.flatMap { $0["samples"] as? [[String: Any]] ?? [] }
            .filter { $0["name"] as? String == name }
            .reduce(0) { $0 + ((($1["value"] as? NSNumber)?.doubleValue) ?? 0) }
    }
}
