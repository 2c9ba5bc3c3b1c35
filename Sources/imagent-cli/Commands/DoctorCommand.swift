#if canImport(Glibc)
import Glibc
#endif
import AgentIPC
import ArgumentParser

/// `imagent doctor`: checks, one line each, what the link needs from here —
/// the socket, the daemon, its configuration, the link, the clock, and DNS and TCP to
/// every configured endpoint — and says what to do about each failure.
struct DoctorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract: "Check the socket, the daemon, its configuration, the link, and DNS and TCP to each endpoint.",
        discussion: """
            One line per check: "ok" or "FAIL" and what to do. Exit status: 0 when every check \
            passes, 2 when imagentd is not running, 3 when the socket refuses this user, 4 when \
            another check failed.
            """)

    @OptionGroup var options: GlobalOptions

    /// One check's outcome.
    struct Check {
        var ok: Bool
        var name: String
        var detail: String

        var line: String { (ok ? "ok    " : "FAIL  ") + name + ": " + detail }
    }

    func run() async throws {
        var checks: [Check] = []
        let client: IPCClient
        do {
            client = try await options.connect(for: "doctor")
        } catch let error as IPCClientError {
            checks.append(Check(ok: false, name: "socket", detail: error.description))
            Output.lines(checks.map(\.line))
            throw CLIFailure(message: "imagentd cannot be reached; fix the socket first", status: ExitStatus(for: error))
        }
        checks.append(Check(ok: true, name: "socket", detail: "\(client.socketPath) accepts this user"))
        checks.append(Check(ok: true, name: "daemon", detail: "imagentd \(client.welcome.daemonVersion) answers"))
        let text: String
        do {
            text = try await client.status()
            await client.close()
        } catch {
            await client.close()
            throw error
        }
        let status = try DaemonDocument.parse(text, from: .status)
        let link = status["link"]
        if let missing = link["unconfigured"]?.stringValue {
            checks.append(Check(ok: false, name: "configuration", detail: "unconfigured: \(missing)"))
        } else {
            checks.append(Check(ok: true, name: "configuration", detail: "endpoints and a token are set"))
        }
        let state = link["state"]?.stringValue ?? "unknown"
        let sentence = link["detail"]?.stringValue ?? state
        if state == "connected" {
            checks.append(Check(ok: true, name: "link", detail: sentence))
        } else {
            let next = link["next_step"]?.stringValue.map { "; \($0)" } ?? ""
            checks.append(Check(ok: false, name: "link", detail: sentence + next))
        }
        if let expires = link["server_certificate_expires_ms"]?.double {
            checks.append(Self.certificate(expiresMS: expires, nowMS: Self.nowMilliseconds()))
        }
        if let offset = link["server_clock_offset_ms"]?.double {
            checks.append(Self.clock(offsetMS: offset, rttMS: link["rtt_ms"]?.double ?? 0))
        }
        for endpoint in (link["endpoints"]?.elements ?? []).compactMap(\.stringValue) {
            checks += Self.reach(endpoint)
        }
        Output.lines(checks.map(\.line))
        if checks.contains(where: { !$0.ok }) {
            throw CLIFailure(message: "\(checks.filter { !$0.ok }.count) of \(checks.count) checks failed", status: .refused)
        }
    }

    /// This host's clock against the server's (LOGIN_OK's SERVER_TIME): tokens
    /// and certificates are checked against the clock, so a skew of seconds matters.
    static func clock(offsetMS: Double, rttMS: Double) -> Check {
        let allowed = 2_000 + rttMS
        // Tenths of a second: the measurement is no finer than a round trip.
        let seconds = HumanFormat.decimal((abs(offsetMS) / 100).rounded() / 10)
        guard abs(offsetMS) > allowed else {
            return Check(ok: true, name: "clock", detail: "within \(seconds) s of the server's")
        }
        let direction = offsetMS > 0 ? "behind" : "ahead of"
        return Check(ok: false, name: "clock", detail: "\(seconds) s \(direction) the server's; synchronise it (timedatectl, NTP)")
    }

    /// The server's TLS certificate of the last handshake: fails within 14 days of its expiry.
    static func certificate(expiresMS: Double, nowMS: Double) -> Check {
        let date = HumanFormat.timestamp(milliseconds: .number(HumanFormat.decimal(expiresMS.rounded())))
        let days = Int(((expiresMS - nowMS) / 86_400_000).rounded(.down))
        if expiresMS <= nowMS {
            return Check(ok: false, name: "certificate", detail: "the server's certificate expired on \(date); tell the server's operator")
        }
        let detail = "the server's certificate expires on \(date), in \(days) days"
        return days < 14 ? Check(ok: false, name: "certificate", detail: detail + "; tell the server's operator")
            : Check(ok: true, name: "certificate", detail: detail)
    }

    static func nowMilliseconds() -> Double {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Double(spec.tv_sec) * 1000 + Double(spec.tv_nsec) / 1e6
    }

    /// DNS, then TCP to each address, for one `host:port` (IPv6 literals in brackets).
    static func reach(_ endpoint: String) -> [Check] {
        guard let (host, port) = split(endpoint) else {
            return [Check(ok: false, name: "endpoint \(endpoint)", detail: "not host:port; fix [server] endpoints")]
        }
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let result = getaddrinfo(host, port, &hints, &list)
        guard result == 0, let first = list else {
            let reason = String(cString: gai_strerror(result))
            return [Check(ok: false, name: "dns \(host)", detail: "\(reason); check the name in [server] endpoints and the resolver")]
        }
        defer { freeaddrinfo(list) }
        var addresses: [(String, Bool, String)] = []
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let current = entry {
            let text = numeric(current.pointee.ai_addr, current.pointee.ai_addrlen)
            let (reached, reason) = connect(current.pointee, timeoutMS: 3_000)
            addresses.append((text, reached, reason))
            entry = current.pointee.ai_next
        }
        var checks = [Check(ok: true, name: "dns \(host)", detail: addresses.map(\.0).joined(separator: ", "))]
        for (address, reached, reason) in addresses {
            checks.append(Check(ok: reached, name: "tcp \(address) port \(port)",
                                detail: reached ? "reachable" : "\(reason); check the server, a firewall or the route"))
        }
        return checks
    }

    static func split(_ endpoint: String) -> (String, String)? {
        if endpoint.hasPrefix("["), let close = endpoint.firstIndex(of: "]") {
            let host = String(endpoint[endpoint.index(after: endpoint.startIndex)..<close])
            let rest = endpoint[endpoint.index(after: close)...]
            guard rest.hasPrefix(":") else { return nil }
            return (host, String(rest.dropFirst()))
        }
        let parts = endpoint.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else { return nil }
        return (String(parts[0]), String(parts[1]))
    }

    private static func numeric(_ address: UnsafeMutablePointer<sockaddr>?, _ length: socklen_t) -> String {
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        guard getnameinfo(address, length, &host, socklen_t(host.count), nil, 0, NI_NUMERICHOST) == 0 else { return "?" }
        return String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// A non-blocking connect, waited for at most `timeoutMS`.
    private static func connect(_ info: addrinfo, timeoutMS: Int32) -> (Bool, String) {
        let fd = socket(info.ai_family, info.ai_socktype | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue),
                        info.ai_protocol)
        guard fd >= 0 else { return (false, String(cString: strerror(errno))) }
        defer { close(fd) }
        if Glibc.connect(fd, info.ai_addr, info.ai_addrlen) == 0 { return (true, "") }
        guard errno == EINPROGRESS else { return (false, String(cString: strerror(errno))) }
        var poller = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        let ready = poll(&poller, 1, timeoutMS)
        guard ready > 0 else { return (false, ready == 0 ? "no answer within \(timeoutMS / 1000) s" : String(cString: strerror(errno))) }
        var failure: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &failure, &length)
        return failure == 0 ? (true, "") : (false, String(cString: strerror(failure)))
    }
}
