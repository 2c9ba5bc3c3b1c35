import NIOCore
import NIOPosix

/// The I/O half of `PathProbe`: its one timer and its TCP connects, on the
/// link's loop. A probe connects to the address the link's socket is
/// connected to (no resolve, no TLS) and is closed the moment it connects.
/// `LinkEngineCore` tells it what the heartbeat owes and hears `onPathBack`.
final class PathProber {
    typealias Probe = PathProbe<SystemRandomNumberGenerator>

    private let loop: EventLoop
    private var probe: Probe
    private var timer: Scheduled<Void>?
    /// The server address of the link being watched.
    private var remote: SocketAddress?
    /// The probe whose result counts; an abandoned one ends at its deadline.
    private var inFlight: Probe.ProbeID?
    /// The last `update`'s reply owed, once acted on (`isWatching`).
    private var watchedSince: MonotonicInstant?
    private var isWatching = false
    /// The path is back: replace the link (the reason is for the log and STATUS).
    var onPathBack: ((String) -> Void)?

    init(loop: EventLoop, reconnect: ReconnectPolicy.Configuration) {
        self.loop = loop
        self.probe = Probe(reconnect: reconnect, random: SystemRandomNumberGenerator())
    }

    /// What the link owes since when (nil: nothing, or the link is down),
    /// and where its socket is connected.
    func update(replyOwedSince: MonotonicInstant?, ackDeadline: @autoclosure () -> Duration, remote: @autoclosure () -> SocketAddress?) {
        // Called after every frame in or out: the value of last time again changes nothing in the
        // probe (it acts on a new one only), and the channel's address is read under a lock.
        if isWatching, replyOwedSince == watchedSince { return }
        guard let replyOwedSince, let address = remote() else {
            watchedSince = nil
            isWatching = replyOwedSince == nil  // without an address yet, ask again next time
            perform(probe.cleared())
            return
        }
        watchedSince = replyOwedSince
        isWatching = true
        self.remote = address
        perform(probe.replyOwed(since: replyOwedSince, ackDeadline: ackDeadline(), now: .now))
    }

    /// The engine shuts down.
    func stop() {
        isWatching = false
        perform(probe.cleared())
        timer?.cancel()
        timer = nil
    }

    private func perform(_ actions: [Probe.Action]) {
        for action in actions {
            switch action {
            case .armTimer(let id, let deadline):
                timer?.cancel()
                timer = loop.assumeIsolated().scheduleTask(deadline: deadline.nioDeadline) { [self] in
                    timer = nil
                    perform(probe.timerFired(id, now: .now))
                }
            case .connect(let id, let deadline):
                connect(id, deadline: deadline)
            case .abandon(let id):
                if inFlight == id { inFlight = nil }
            case .pathBack(let reason):
                onPathBack?(reason)
            }
        }
    }

    private func connect(_ id: Probe.ProbeID, deadline: Duration) {
        guard let remote else { return }
        let started = MonotonicInstant.now
        inFlight = id
        ClientBootstrap(group: loop)
            .connectTimeout(.nanoseconds(deadline.wholeNanoseconds))
            .connect(to: remote)
            .assumeIsolated()
            .whenComplete { [self] result in
                let now = MonotonicInstant.now
                let current = inFlight == id
                if current { inFlight = nil }
                switch result {
                case .success(let channel):
                    // It proved what it could; it carries nothing.
                    channel.close(promise: nil)
                    if current { perform(probe.probeEnded(id, .connected(after: now - started), now: now)) }
                case .failure(let error):
                    if current { perform(probe.probeEnded(id, isSilent(error) ? .silent : .refused, now: now)) }
                }
            }
    }
}
