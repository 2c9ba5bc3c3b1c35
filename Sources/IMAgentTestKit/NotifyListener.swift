#if canImport(Glibc)
import Glibc
#endif

/// The service manager's side of `sd_notify(3)`: a Unix datagram socket the
/// daemon is given as `$NOTIFY_SOCKET`, each datagram a few `KEY=value` lines,
/// stamped with the time it was read.
public final class NotifyListener: @unchecked Sendable {
    public let path: String
    private var descriptor: CInt

    public init(path: String) throws(ChildProcessError) {
        self.path = path
        descriptor = try makeUnixSocket(type: Int32(SOCK_DGRAM.rawValue), path: path)
    }

    deinit { close() }

    /// Closes the socket and removes its file; later reads return nil.
    public func close() {
        if descriptor >= 0 {
            Glibc.close(descriptor)
            unlink(path)
        }
        descriptor = -1
    }

    /// The next datagram and when it was read, or nil after `milliseconds` without one.
    /// Blocks the calling thread: call it only while nothing else in this process needs it.
    public func next(milliseconds: Int32) -> (text: String, at: ContinuousClock.Instant)? {
        var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        guard descriptor >= 0, poll(&poller, 1, milliseconds) == 1 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = recv(descriptor, &buffer, buffer.count, 0)
        let at = ContinuousClock.now
        guard count > 0 else { return nil }
        return (String(decoding: buffer[..<count], as: UTF8.self), at)
    }

    /// One datagram, or nil after 100 ms of silence.
    public func receive() -> String? { next(milliseconds: 100)?.text }

    /// Reads datagrams until one has a line starting with `prefix`; the instant it was read.
    public func wait(for prefix: String, milliseconds: Int) -> ContinuousClock.Instant? {
        let deadline = ContinuousClock.now + .milliseconds(milliseconds)
        while ContinuousClock.now < deadline {
            let left = Int32(max(1, (deadline - ContinuousClock.now) / .milliseconds(1)))
            guard let datagram = next(milliseconds: left) else { return nil }
            if datagram.text.split(separator: "\n").contains(where: { $0.hasPrefix(prefix) }) { return datagram.at }
        }
        return nil
    }
}
