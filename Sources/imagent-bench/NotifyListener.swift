#if canImport(Glibc)
import Glibc
#endif

/// The service manager's side of `sd_notify(3)`: a Unix datagram socket the
/// daemon is given as `$NOTIFY_SOCKET`, each datagram a few `KEY=value` lines,
/// stamped with the time it was read.
final class NotifyListener {
    let path: String
    private let descriptor: CInt

    init(path: String) throws {
        self.path = path
        unlink(path)
        descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        guard descriptor >= 0 else { throw BenchError("socket(AF_UNIX, SOCK_DGRAM) failed") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        // No close before a throw: `deinit` runs for an initializer that throws once every
        // stored property is set, and a second close could hit another thread's descriptor.
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw BenchError("\(path) is too long for a socket path")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes + [0]) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0 else { throw BenchError("cannot bind \(path)") }
    }

    deinit {
        if descriptor >= 0 { close(descriptor) }
        unlink(path)
    }

    /// The next datagram and when it was read, or nil after `milliseconds` without one.
    /// Blocks the calling thread: call it only while nothing else in this process needs it.
    func next(milliseconds: Int32) -> (text: String, at: ContinuousClock.Instant)? {
        var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, milliseconds) == 1 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = recv(descriptor, &buffer, buffer.count, 0)
        let at = ContinuousClock.now
        guard count > 0 else { return nil }
        return (String(decoding: buffer[..<count], as: UTF8.self), at)
    }

    /// Reads datagrams until one has a line starting with `prefix`; the instant it was read.
    func wait(for prefix: String, milliseconds: Int) -> ContinuousClock.Instant? {
        let deadline = ContinuousClock.now + .milliseconds(milliseconds)
        while ContinuousClock.now < deadline {
            let left = Int32(max(1, (deadline - ContinuousClock.now).seconds * 1000))
            guard let datagram = next(milliseconds: left) else { return nil }
            if datagram.text.split(separator: "\n").contains(where: { $0.hasPrefix(prefix) }) { return datagram.at }
        }
        return nil
    }
}
