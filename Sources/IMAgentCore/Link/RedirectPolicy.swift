/// Where a GOAWAY REDIRECT may lead: the daemon sends its token (LOGIN) to
/// the target, so only to a configured endpoint or to a host the operator
/// listed in `[server] redirect_allow`. Redirects before LOGIN_OK are never
/// followed (the machine drops them); over TLS the target's certificate is
/// verified for the target's own name (`LinkTLS`).
struct RedirectPolicy: Hashable, Sendable {
    var endpoints: [Endpoint] = []
    /// `host`, `host:port`, `*.domain` or `*.domain:port`; names compare without case.
    var allowedPatterns: [String] = []

    func permits(_ target: Endpoint) -> Bool {
        if endpoints.contains(where: { $0.host.lowercased() == target.host.lowercased() && $0.port == target.port }) { return true }
        return allowedPatterns.contains { Self.matches(pattern: $0, target) }
    }

    static func matches(pattern: String, _ target: Endpoint) -> Bool {
        var hostPattern = Substring(pattern.lowercased())
        if let endpoint = Endpoint(parsing: pattern) {
            guard endpoint.port == target.port else { return false }
            hostPattern = Substring(endpoint.host.lowercased())
        } else if hostPattern.hasPrefix("["), hostPattern.hasSuffix("]") {
            hostPattern = hostPattern.dropFirst().dropLast()
        }
        let host = target.host.lowercased()
        if hostPattern.hasPrefix("*.") {
            // One or more labels before the domain; never the bare domain itself.
            let domain = hostPattern.dropFirst(1)
            return host.hasSuffix(domain) && host.count > domain.count
        }
        return host == hostPattern
    }

    /// True when every host the pattern matches is a loopback address.
    static func patternIsLoopback(_ pattern: String) -> Bool {
        var host = Endpoint(parsing: pattern)?.host ?? pattern
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if host.hasPrefix("*.") { return host.lowercased() == "*.localhost" }
        return Endpoint(host: host, port: 1).isLoopback
    }

    /// Why a `redirect_allow` entry is malformed, or nil.
    static func patternProblem(_ pattern: String) -> String? {
        let host = Endpoint(parsing: pattern)?.host ?? pattern
        let rest = host.hasPrefix("*.") ? String(host.dropFirst(2)) : host
        if rest.isEmpty || rest.contains("*") || rest.contains("/") || rest.contains(" ") {
            return "\"\(pattern)\" is not a host pattern (host, host:port, *.domain or *.domain:port)"
        }
        return nil
    }
}

extension Endpoint {
    /// True for `localhost` and loopback IP literals (127.0.0.0/8, ::1):
    /// traffic to them never leaves the host, so plaintext needs no consent.
    var isLoopback: Bool {
        let name = host.lowercased()
        if name == "localhost" || name.hasSuffix(".localhost") || name == "::1" || name == "0:0:0:0:0:0:0:1" { return true }
        let octets = name.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets.allSatisfy { UInt8($0) != nil } && octets[0] == "127"
    }
}
