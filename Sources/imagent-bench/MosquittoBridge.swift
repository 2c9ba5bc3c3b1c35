#if canImport(Glibc)
import Glibc
#endif

/// Two mosquitto brokers on loopback, each a child process with its own
/// configuration and persistence directory: `upstream` stands where the
/// reference server stands, `local` where imagentd stands, bridged to
/// upstream at QoS 1 (`bench/#` out, `resp/#` in).
///
/// Both tunings set `max_queued_messages 0` (no limit): with the default of
/// 1,000 the local broker PUBACKs messages it later drops silently when the
/// bridge falls behind, and a comparison that loses messages compares
/// nothing. `persistence true` is set too, but mosquitto writes its snapshot
/// only every `autosave_interval` (1,800 s): it is not per-message durability.
/// `tuned` adds `set_tcp_nodelay true` and unlimited in-flight messages, the
/// best mosquitto offers without patches.
final class MosquittoBridge {
    enum Tuning: String, CaseIterable {
        case shipped = "as shipped"
        case tuned = "tuned"
    }

    static let binary = "/usr/sbin/mosquitto"

    let directory: String
    let upstreamPort: Int
    let localPort: Int
    /// The local and the upstream broker.
    private(set) var pids: [pid_t] = []

    init(tuning: Tuning) async throws {
        guard access(Self.binary, X_OK) == 0 else {
            throw BenchError("\(Self.binary) is missing: apt-get install mosquitto (scripts/bench does)")
        }
        var template = Array("/tmp/imagent-bench-mosquitto-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw BenchError("mkdtemp failed") }
        directory = String(cString: made)
        temporaryDirectories.append(directory)
        upstreamPort = try freeLoopbackPort()
        localPort = try freeLoopbackPort()
        do {
            let common = """
                allow_anonymous true
                user root
                persistence true
                max_queued_messages 0
                log_dest stderr
                log_type error
                log_type warning
                \(tuning == .tuned ? "set_tcp_nodelay true\nmax_inflight_messages 0\n" : "")
                """
            mkdir(directory + "/upstream", 0o700)
            mkdir(directory + "/local", 0o700)
            try writeFile(directory + "/upstream.conf", """
                listener \(upstreamPort) 127.0.0.1
                persistence_location \(directory)/upstream/
                \(common)
                """)
            try writeFile(directory + "/local.conf", """
                listener \(localPort) 127.0.0.1
                persistence_location \(directory)/local/
                \(common)
                connection upstream
                address 127.0.0.1:\(upstreamPort)
                topic bench/# out 1
                topic resp/# in 1

                """)
            pids.append(try spawn(Self.binary, ["-c", directory + "/upstream.conf"], output: directory + "/upstream.log"))
            try await waitForListener(upstreamPort)
            pids.append(try spawn(Self.binary, ["-c", directory + "/local.conf"], output: directory + "/local.log"))
            try await waitForListener(localPort)
            for pid in pids { mosquittoPIDs.append(pid) }
        } catch {
            await stop()
            throw error
        }
    }

    /// VmRSS of the two brokers in KiB.
    var memory: (upstream: Int, local: Int) {
        (DaemonProcess.memory(of: pids[0]).rss, DaemonProcess.memory(of: pids[1]).rss)
    }

    var log: String {
        (readFile(directory + "/local.log") ?? "") + (readFile(directory + "/upstream.log") ?? "")
    }

    func stop() async {
        for pid in pids {
            kill(pid, SIGTERM)
            var status: CInt = 0
            waitpid(pid, &status, 0)
        }
        mosquittoPIDs.removeAll { pids.contains($0) }
        pids = []
        removeDirectory(directory)
    }
}

/// Brokers to kill if the watchdog has to end the run.
nonisolated(unsafe) var mosquittoPIDs: [pid_t] = []

/// A port that was free a moment ago (bound to 0, then released).
private func freeLoopbackPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw BenchError("socket() failed") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
        }
    }
    guard bound else { throw BenchError("cannot find a free port") }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// Waits until something accepts TCP connections on 127.0.0.1:`port` (5 s at most).
private func waitForListener(_ port: Int) async throws {
    for _ in 0..<200 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        close(fd)
        if connected { return }
        try await Task.sleep(for: .milliseconds(25))
    }
    throw BenchError("mosquitto did not listen on port \(port) within 5 s")
}
