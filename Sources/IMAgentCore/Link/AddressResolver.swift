import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The resolve stage: every address of an endpoint, from getaddrinfo (which
/// orders them per RFC 6724), run on the engine's thread pool because it
/// blocks. Results are reused for a short while so that a reconnect storm
/// does not become a DNS storm.
enum AddressResolution {
    /// Blocking: call off the event loop.
    static func resolve(_ endpoint: Endpoint) throws(ResolveError) -> [ResolvedAddress] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_protocol = Int32(IPPROTO_TCP)
        hints.ai_flags = AI_ADDRCONFIG
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(endpoint.host, String(endpoint.port), &hints, &list)
        guard status == 0 else {
            throw ResolveError("\(endpoint.host): \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(list) }
        var addresses: [ResolvedAddress] = []
        var next = list
        while let entry = next {
            if let ip = numericHost(entry.pointee.ai_addr, length: entry.pointee.ai_addrlen) {
                let address = ResolvedAddress(ip: ip, port: endpoint.port)
                if !addresses.contains(address) { addresses.append(address) }
            }
            next = entry.pointee.ai_next
        }
        return addresses
    }

    private static func numericHost(_ address: UnsafeMutablePointer<sockaddr>?, length: socklen_t) -> String? {
        guard let address else { return nil }
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        let status = getnameinfo(address, length, &host, socklen_t(host.count), nil, 0, NI_NUMERICHOST)
        guard status == 0 else { return nil }
        return host.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }
}

/// Whether `host` is a numeric IPv4 or IPv6 address rather than a name.
func isIPLiteral(_ host: String) -> Bool {
    var v4 = in_addr()
    var v6 = in6_addr()
    return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
}

struct ResolveError: Error, Hashable, Sendable, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Resolved addresses by endpoint, each with its expiry. Loop-confined.
struct ResolveCache {
    private var entries: [Endpoint: (addresses: [ResolvedAddress], expires: MonotonicInstant)] = [:]
    let lifetime: Duration

    init(lifetime: Duration) { self.lifetime = lifetime }

    func lookup(_ endpoint: Endpoint, now: MonotonicInstant) -> [ResolvedAddress]? {
        guard let entry = entries[endpoint], entry.expires > now else { return nil }
        return entry.addresses
    }

    mutating func store(_ addresses: [ResolvedAddress], for endpoint: Endpoint, now: MonotonicInstant) {
        entries[endpoint] = (addresses, now + lifetime)
    }

    /// A network change makes every answer suspect (split-horizon DNS, a VPN).
    mutating func removeAll() { entries.removeAll() }
}

/// Hands NIO's Happy Eyeballs connector (RFC 8305: IPv6 first, IPv4 250 ms
/// later unless connected, first success wins, the rest cancelled) the
/// addresses our own resolve stage already found, so the state machine sees
/// the resolve and TCP stages separately and honestly, and NIO's tested
/// racing code does the racing.
struct PrefetchedResolver: Resolver, Sendable {
    let loop: EventLoop
    let v4: [SocketAddress]
    let v6: [SocketAddress]

    init(addresses: [ResolvedAddress], loop: EventLoop) {
        self.loop = loop
        var v4: [SocketAddress] = []
        var v6: [SocketAddress] = []
        for address in addresses {
            guard let socketAddress = try? SocketAddress(ipAddress: address.ip, port: Int(address.port)) else { continue }
            switch socketAddress.protocol {
            case .inet6: v6.append(socketAddress)
            default: v4.append(socketAddress)
            }
        }
        self.v4 = v4
        self.v6 = v6
    }

    func initiateAQuery(host: String, port: Int) -> EventLoopFuture<[SocketAddress]> {
        loop.makeSucceededFuture(v4)
    }

    func initiateAAAAQuery(host: String, port: Int) -> EventLoopFuture<[SocketAddress]> {
        loop.makeSucceededFuture(v6)
    }

    func cancelQueries() {}
}
