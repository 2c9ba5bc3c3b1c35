import Glibc

/// Plays systemd's side of sd_notify: a Unix datagram socket bound in a
/// private temporary directory, whose path goes into `$NOTIFY_SOCKET`.
final class NotifySocketFake {
    let path: String
    private let directory: String
    private let fd: Int32

    init() {
        directory = makeTemporaryDirectory()
        path = directory + "/notify"
        fd = makeUnixSocket(type: Int32(SOCK_DGRAM.rawValue), path: path, listen: false)
    }

    deinit {
        close(fd)
        unlink(path)
        rmdir(directory)
    }

    /// The next datagram, or nil if none arrives within `timeoutMS`.
    func receive(timeoutMS: Int32 = 2_000) -> String? {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, timeoutMS) == 1 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 4_096)
        let count = recv(fd, &buffer, buffer.count, 0)
        guard count >= 0 else { return nil }
        return String(decoding: buffer[..<count], as: UTF8.self)
    }
}
