import Glibc
import IMAgentTestKit

/// Plays systemd's side of sd_notify: a Unix datagram socket bound in a
/// private temporary directory, whose path goes into `$NOTIFY_SOCKET`.
final class NotifySocketFake {
    var path: String { listener.path }
    private let directory: String
    private let listener: NotifyListener

    init() throws {
        directory = try makeTemporaryDirectory(prefix: "imagent-test")
        listener = try NotifyListener(path: directory + "/notify")
    }

    deinit {
        listener.close()
        rmdir(directory)
    }

    /// The next datagram, or nil if none arrives within `timeoutMS`.
    func receive(timeoutMS: Int32 = 2_000) -> String? {
        listener.next(milliseconds: timeoutMS)?.text
    }
}
