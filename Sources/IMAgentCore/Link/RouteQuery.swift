#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// rtnetlink requests and replies as bytes (linux/netlink.h, linux/rtnetlink.h):
/// enough to ask the kernel "which route would a packet to X take?" and
/// "is there a default route?", and to subscribe to link, address and route
/// changes. Blocking; used on the network watcher's thread only.
enum RouteQuery {
    // linux/netlink.h, linux/rtnetlink.h (not exported by the Glibc module)
    static let netlinkRoute: Int32 = 0
    static let nlmsgError: UInt16 = 2
    static let nlmsgDone: UInt16 = 3
    static let rtmNewRoute: UInt16 = 24
    static let rtmGetRoute: UInt16 = 26
    static let nlmFRequest: UInt16 = 0x1
    static let nlmFDump: UInt16 = 0x300
    static let rtaDst: UInt16 = 1
    static let rtaOif: UInt16 = 4
    static let rtaGateway: UInt16 = 5
    static let rtaPrefsrc: UInt16 = 7
    static let rtaTable: UInt16 = 15
    static let rtnUnicast: UInt8 = 1
    static let rtTableMain: UInt32 = 254
    /// RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_IFADDR | RTMGRP_IPV6_ROUTE
    static let watchedGroups: UInt32 = 0x1 | 0x10 | 0x40 | 0x100 | 0x400

    /// The path a packet would take: interface, gateway, source; equal
    /// values mean "nothing that matters to the link changed".
    struct Path: Hashable, Sendable, CustomStringConvertible {
        var oif: UInt32
        var gateway: [UInt8]
        var source: [UInt8]
        var description: String { "oif \(oif)" }
    }

    /// A netlink route socket, bound to `groups` (0 for a request socket).
    static func openSocket(groups: UInt32) -> Int32? {
        let fd = socket(AF_NETLINK, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), netlinkRoute)
        guard fd >= 0 else { return nil }
        // struct sockaddr_nl { u16 family; u16 pad; u32 pid; u32 groups; }
        var address = [UInt8](repeating: 0, count: 12)
        withUnsafeBytes(of: UInt16(AF_NETLINK)) { address.replaceSubrange(0..<2, with: $0) }
        withUnsafeBytes(of: groups) { address.replaceSubrange(8..<12, with: $0) }
        let bound = address.withUnsafeBytes { raw in
            bind(fd, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count))
        }
        guard bound == 0 else {
            close(fd)
            return nil
        }
        var timeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        return fd
    }

    /// The route the kernel picks for `ip` (RTM_GETROUTE for a destination,
    /// like `ip route get`), nil when it has none (ENETUNREACH & co.).
    static func route(to ip: String) -> Path? {
        var v4 = in_addr()
        var v6 = in6_addr()
        let family: UInt8
        let address: [UInt8]
        if inet_pton(AF_INET, ip, &v4) == 1 {
            family = UInt8(AF_INET)
            address = withUnsafeBytes(of: v4) { Array($0) }
        } else if inet_pton(AF_INET6, ip, &v6) == 1 {
            family = UInt8(AF_INET6)
            address = withUnsafeBytes(of: v6) { Array($0) }
        } else {
            return nil
        }
        var rtmsg = [UInt8](repeating: 0, count: 12)
        rtmsg[0] = family
        rtmsg[1] = UInt8(address.count * 8)
        let request = message(type: rtmGetRoute, flags: nlmFRequest, body: rtmsg + attribute(rtaDst, address))
        guard let replies = exchange(request) else { return nil }
        for reply in replies where reply.type == rtmNewRoute {
            return parseRoute(reply.body)?.path
        }
        return nil
    }

    /// The default routes of the main table (both families), as paths.
    static func defaultRoutes() -> Set<Path> {
        let request = message(type: rtmGetRoute, flags: nlmFRequest | nlmFDump, body: [UInt8](repeating: 0, count: 12))
        guard let replies = exchange(request) else { return [] }
        var paths: Set<Path> = []
        for reply in replies where reply.type == rtmNewRoute {
            guard let route = parseRoute(reply.body), route.destinationLength == 0, route.table == rtTableMain,
                route.type == rtnUnicast
            else { continue }
            paths.insert(route.path)
        }
        return paths
    }

    private struct Reply {
        var type: UInt16
        var body: ArraySlice<UInt8>
    }

    private struct Route {
        var destinationLength: UInt8
        var table: UInt32
        var type: UInt8
        var path: Path
    }

    private static func message(type: UInt16, flags: UInt16, body: [UInt8]) -> [UInt8] {
        var bytes: [UInt8] = []
        append(&bytes, UInt32(16 + body.count))
        append(&bytes, type)
        append(&bytes, flags)
        append(&bytes, UInt32(1))  // seq
        append(&bytes, UInt32(0))  // pid: the kernel
        return bytes + body
    }

    private static func attribute(_ type: UInt16, _ value: [UInt8]) -> [UInt8] {
        var bytes: [UInt8] = []
        append(&bytes, UInt16(4 + value.count))
        append(&bytes, type)
        bytes += value
        while bytes.count % 4 != 0 { bytes.append(0) }
        return bytes
    }

    private static func append<T: FixedWidthInteger>(_ bytes: inout [UInt8], _ value: T) {
        withUnsafeBytes(of: value.littleEndian) { bytes += $0 }
    }

    private static func read<T: FixedWidthInteger>(_ bytes: ArraySlice<UInt8>, at offset: Int, as: T.Type) -> T? {
        let start = bytes.startIndex + offset
        guard offset >= 0, start + MemoryLayout<T>.size <= bytes.endIndex else { return nil }
        var value: T = 0
        withUnsafeMutableBytes(of: &value) { $0.copyBytes(from: bytes[start..<(start + MemoryLayout<T>.size)]) }
        return T(littleEndian: value)
    }

    /// Sends one request on a fresh socket and collects the replies until
    /// the answer is complete (one reply, an error, or NLMSG_DONE of a dump).
    private static func exchange(_ request: [UInt8]) -> [Reply]? {
        guard let fd = openSocket(groups: 0) else { return nil }
        defer { close(fd) }
        let sent = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
        guard sent == request.count else { return nil }
        let isDump = (read(request[...], at: 6, as: UInt16.self) ?? 0) & nlmFDump != 0
        var replies: [Reply] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return nil }
            var offset = 0
            let data = buffer[0..<count]
            while offset + 16 <= count {
                guard let length = read(data, at: offset, as: UInt32.self), length >= 16,
                    let type = read(data, at: offset + 4, as: UInt16.self), offset + Int(length) <= count
                else { return nil }
                let body = data[(offset + 16)..<(offset + Int(length))]
                switch type {
                case nlmsgDone:
                    return replies
                case nlmsgError:
                    // error 0 is an ACK; anything else means "no route".
                    return read(body, at: 0, as: Int32.self) == 0 ? replies : []
                default:
                    replies.append(Reply(type: type, body: body))
                    if !isDump { return replies }
                }
                offset += (Int(length) + 3) & ~3
            }
        }
    }

    private static func parseRoute(_ body: ArraySlice<UInt8>) -> Route? {
        guard body.count >= 12 else { return nil }
        let base = body.startIndex
        var route = Route(
            destinationLength: body[base + 1],
            table: UInt32(body[base + 4]),
            type: body[base + 7],
            path: Path(oif: 0, gateway: [], source: [])
        )
        var offset = 12
        while offset + 4 <= body.count {
            guard let length = read(body, at: offset, as: UInt16.self), length >= 4,
                let type = read(body, at: offset + 2, as: UInt16.self), offset + Int(length) <= body.count
            else { break }
            let value = body[(base + offset + 4)..<(base + offset + Int(length))]
            switch type {
            case rtaOif: route.path.oif = read(value, at: 0, as: UInt32.self) ?? 0
            case rtaGateway: route.path.gateway = Array(value)
            case rtaPrefsrc: route.path.source = Array(value)
            case rtaTable: route.table = read(value, at: 0, as: UInt32.self) ?? route.table
            default: break
            }
            offset += (Int(length) + 3) & ~3
        }
        return route
    }
}
