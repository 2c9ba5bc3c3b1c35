import Logging
import NIOPosix

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Notices network changes in milliseconds: an rtnetlink socket subscribed
/// to link, address and route changes (IPv4 and IPv6), read by a blocking
/// `poll` on a thread of its own, so it costs no wake-up while nothing
/// changes.
///
/// Changes come in bursts (a link going up brings addresses and routes), so
/// after the first message the watcher waits until `debounce` passes without
/// another, then asks the kernel about the endpoints and reports at most one
/// event to the engine:
///
/// | reachable before | reachable now | path changed | event      |
/// |------------------|---------------|--------------|------------|
/// | no               | yes           | —            | `.up`      |
/// | yes              | no            | —            | `.down`    |
/// | yes              | yes           | yes          | `.changed` |
/// | otherwise        |               |              | none       |
///
/// **Reachability rule.** An endpoint is reachable when the kernel has a
/// route to it: for an IP literal, RTM_GETROUTE for that destination (as
/// `ip route get` does) — so loopback endpoints are always reachable, and a
/// test server behind a veth is reachable exactly while the veth's route
/// exists; for a name, a default route in the main table (resolving here
/// would mean DNS traffic on every flap). The link is reachable when any
/// endpoint is. The *path* (interface, gateway, source address per endpoint)
/// is compared too, so unrelated churn (a container's veth appearing) is not
/// a "change" that would reset the heartbeat's NAT probing.
final class NetworkWatcher: Sendable {
    private let endpoints: [Endpoint]
    private let debounce: Duration
    private let logger: Logger
    private let report: @Sendable (NetworkEvent) -> Void
    private let thread: NIOThreadPool
    private let socket: Int32
    private let stopEvent: Int32
    private let stopSignal: Int32

    init?(
        endpoints: [Endpoint],
        debounce: Duration = .milliseconds(100),
        logger: Logger,
        report: @escaping @Sendable (NetworkEvent) -> Void
    ) {
        guard let socket = RouteQuery.openSocket(groups: RouteQuery.watchedGroups) else {
            logger.warning("network watcher off: cannot open an rtnetlink socket: \(errnoText())")
            return nil
        }
        // A pipe wakes the thread for `stop()` (eventfd is not exported by the Glibc module).
        var stopPipe: [Int32] = [-1, -1]
        guard pipe(&stopPipe) == 0 else {
            close(socket)
            logger.warning("network watcher off: pipe: \(errnoText())")
            return nil
        }
        for fd in stopPipe { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        self.endpoints = endpoints
        self.debounce = debounce
        self.logger = logger
        self.report = report
        self.socket = socket
        self.stopEvent = stopPipe[0]
        self.stopSignal = stopPipe[1]
        self.thread = NIOThreadPool(numberOfThreads: 1)
    }

    /// Starts the watching thread; it reports `.down` at once when nothing is
    /// reachable (the link assumes a network until told otherwise).
    func start() {
        thread.start()
        thread.submit { [self] state in
            guard case .active = state else { return }
            watch()
        }
    }

    /// Stops and joins the thread, and closes the sockets.
    func stop() async {
        var one: UInt8 = 1
        _ = write(stopSignal, &one, 1)
        try? await thread.shutdownGracefully()
        close(socket)
        close(stopEvent)
        close(stopSignal)
    }

    /// What is known after one check.
    struct Snapshot: Hashable, Sendable {
        var reachable: Bool
        var paths: [String: RouteQuery.Path?]
    }

    /// Asks the kernel about every endpoint. Blocking (a few netlink round trips).
    func check() -> Snapshot {
        var paths: [String: RouteQuery.Path?] = [:]
        var reachable = false
        var defaults: Set<RouteQuery.Path>?
        for endpoint in endpoints {
            if isIPLiteral(endpoint.host) {
                let path = RouteQuery.route(to: endpoint.host)
                paths[endpoint.description] = path
                reachable = reachable || path != nil
            } else if endpoint.host == "localhost" {
                reachable = true
            } else {
                let found = defaults ?? RouteQuery.defaultRoutes()
                defaults = found
                paths["default"] = found.sorted { $0.oif < $1.oif }.first
                reachable = reachable || !found.isEmpty
            }
        }
        return Snapshot(reachable: reachable, paths: paths)
    }

    private func watch() {
        var known = check()
        logger.info("network watcher: endpoints \(known.reachable ? "reachable" : "unreachable")")
        if !known.reachable { report(.down) }
        var buffer = [UInt8](repeating: 0, count: 65536)
        // The check runs `debounce` after the first message of a burst, not
        // after the last: a link that never quiets down still gets checked.
        var checkAt: UInt64?
        while true {
            var fds = [
                pollfd(fd: socket, events: Int16(POLLIN), revents: 0),
                pollfd(fd: stopEvent, events: Int16(POLLIN), revents: 0),
            ]
            let waitMS: Int32 = checkAt.map { Int32(($0 &- min($0, monotonicNanoseconds())) / 1_000_000) } ?? -1
            let ready = poll(&fds, 2, waitMS)
            if ready < 0 {
                if errno == EINTR { continue }
                logger.error("network watcher stopped: poll: \(errnoText())")
                return
            }
            if fds[1].revents != 0 { return }
            if fds[0].revents != 0 {
                // Drain what is queued; the content does not matter, only that
                // something changed. ENOBUFS (an overrun) also means "changed".
                drain: while true {
                    let count = recv(socket, &buffer, buffer.count, Int32(MSG_DONTWAIT))
                    if count > 0 { continue }
                    if count < 0 && (errno == ENOBUFS || errno == EINTR) { continue }
                    break drain
                }
                if checkAt == nil {
                    checkAt = monotonicNanoseconds() + UInt64(debounce.wholeNanoseconds)
                }
            }
            guard let due = checkAt, monotonicNanoseconds() >= due else { continue }
            // The burst is over: one check, at most one event.
            checkAt = nil
            let now = check()
            switch (known.reachable, now.reachable) {
            case (false, true): report(.up)
            case (true, false): report(.down)
            case (true, true) where now.paths != known.paths: report(.changed)
            case (true, true), (false, false): break
            }
            known = now
        }
    }
}
