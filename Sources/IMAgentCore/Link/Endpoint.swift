/// A server address as configured or redirected to: `host:port`, with an
/// IPv6 literal in brackets (`[2001:db8::1]:7443`), as wire.md's REDIRECT
/// record and the `server.endpoints` setting write it.
struct Endpoint: Hashable, Sendable, CustomStringConvertible {
    /// A name or an IP literal (without brackets).
    var host: String
    var port: UInt16

    init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    /// Parses `host:port` or `[ipv6]:port`; nil when either part is missing
    /// or the port is not 1–65535.
    init?(parsing text: String) {
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"),
                text[text.index(after: close)...].hasPrefix(":")
            else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":") else { return nil }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
            // An unbracketed host with a colon would be an ambiguous IPv6 literal.
            guard !host.contains(":") else { return nil }
        }
        guard !host.isEmpty, let port = UInt16(portText), port != 0 else { return nil }
        self.init(host: String(host), port: port)
    }

    var description: String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }
}

/// One address a name resolved to, for the TCP stage to race.
struct ResolvedAddress: Hashable, Sendable, CustomStringConvertible {
    /// A numeric IPv4 or IPv6 address.
    var ip: String
    var port: UInt16

    var description: String { Endpoint(host: ip, port: port).description }
}

/// Which endpoint the next attempt uses: endpoint failover.
///
/// Endpoints are tried in their configured order, the first being preferred.
/// When one fails at its own fault (unresolvable, unreachable, broken
/// handshake) the next is tried at once; only when a whole round has failed
/// does the caller back off, and the next round starts again from the first,
/// so the preferred endpoint is used again as soon as it works. A GOAWAY
/// REDIRECT is used for the next attempt only.
struct EndpointRotation: Hashable, Sendable {
    /// What an attempt connects to.
    enum Target: Hashable, Sendable {
        case configured(index: Int)
        case redirect(Endpoint)
    }

    let endpoints: [Endpoint]
    private var nextIndex = 0
    private var redirect: Endpoint?
    /// The endpoints that failed in the current round, in order: for logs and status.
    private(set) var failedThisRound: [Endpoint] = []

    init(endpoints: [Endpoint]) {
        precondition(!endpoints.isEmpty, "the link needs at least one endpoint")
        self.endpoints = endpoints
    }

    func endpoint(for target: Target) -> Endpoint {
        switch target {
        case .configured(let index): endpoints[index]
        case .redirect(let endpoint): endpoint
        }
    }

    /// The endpoint the next attempt will use.
    var upcoming: Endpoint { redirect ?? endpoints[nextIndex] }

    /// The target of the next attempt; a pending redirect is used up by this.
    mutating func nextTarget() -> Target {
        if let redirect {
            self.redirect = nil
            return .redirect(redirect)
        }
        return .configured(index: nextIndex)
    }

    /// The next attempt goes to `endpoint`, later ones to the configured list
    /// from its start.
    mutating func redirect(to endpoint: Endpoint) {
        startNewRound()
        redirect = endpoint
    }

    /// Back to the preferred endpoint: after a link worked, after a full
    /// round failed, or after a failure that was not the endpoint's fault.
    mutating func startNewRound() {
        nextIndex = 0
        failedThisRound = []
        redirect = nil
    }

    /// `target` failed at its own fault. Returns true when another endpoint of
    /// this round is left to try at once, false when the round is over (the
    /// next round starts from the first endpoint, after a backoff).
    mutating func failed(_ target: Target) -> Bool {
        switch target {
        case .redirect:
            // The configured round has not been touched yet.
            return true
        case .configured(let index):
            failedThisRound.append(endpoints[index])
            nextIndex = index + 1
            guard nextIndex < endpoints.count else {
                startNewRound()
                return false
            }
            return true
        }
    }
}
