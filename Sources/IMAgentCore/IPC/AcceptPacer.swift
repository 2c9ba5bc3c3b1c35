import NIOCore

/// Paces the main socket's accepting while it brings only connections to
/// refuse (a user flooding it past their cap): after a batch in which every
/// connection was refused, the next batch waits `pause`. Each refusal costs
/// the daemon its accept, credentials and close, so a flood then takes a
/// bounded share of a core (about a sixth, debug build) instead of all the
/// daemon gets, and the host's other work, the clients' requests and the
/// admin socket, which is never paced, keep the rest.
final class AcceptPacer: ChannelOutboundHandler {
    typealias OutboundIn = Never

    /// The wait after a batch of refusals.
    static let pause: TimeAmount = .milliseconds(5)

    private let limits: NIOLoopBoundBox<ConnectionLimits>
    private var scheduledRead: Scheduled<Void>?

    init(limits: NIOLoopBoundBox<ConnectionLimits>) {
        self.limits = limits
    }

    func read(context: ChannelHandlerContext) {
        guard scheduledRead == nil else { return }
        guard limits.value.paceAccepting() else {
            context.read()
            return
        }
        scheduledRead = context.eventLoop.assumeIsolated().scheduleTask(in: Self.pause) {
            self.scheduledRead = nil
            context.read()
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        scheduledRead?.cancel()
        scheduledRead = nil
    }
}
